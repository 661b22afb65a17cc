//! gputopo plugin library (filled in by the foundation issue).
