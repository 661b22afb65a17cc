//! Per-GPU health model and the Extra JSON format (to be written by the node-agent issue).
