//! Fake NVML (filled in by the node-agent issue).
