//! gputopo.conf parsing (to be written by the node-agent issue).
