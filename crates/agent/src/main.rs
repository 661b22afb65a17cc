//! The `gputopo` command. Subcommands are added by their issues.
#![forbid(unsafe_code)]

fn main() {
    eprintln!("gputopo: no subcommand yet");
    std::process::exit(2);
}
