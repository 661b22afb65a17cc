//! Trace-driven cluster simulator (to be written by the evaluation issue).
