//! Multifactor priority math (to be written by the priority issue).
