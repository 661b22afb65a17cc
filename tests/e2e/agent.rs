//! agent end-to-end tests (to be written).
