//! ABI checks of the built plugin (to be written by the foundation issue).
