//! Reading a Slurm config file the way Slurm does, `Include` lines followed, so the agent sees
//! the same GPU lines as slurmd (issue 25 item 4).
//!
//! Slurm's parser (src/common/parse_config.c, `_parse_include_directive`, 22.05 to 24.11):
//! a line that starts with `include` (any case) and whitespace names a file, whose lines are
//! parsed right there; a relative name is relative to the directory of the file that includes
//! it; the included file may include others. A name with a `%` expansion (`%c`, the cluster
//! name) is not followed here: the agent refuses rather than guess, as for any include it
//! cannot read (slurmd would not start with it either).

use std::path::{Path, PathBuf};

/// How deep includes may nest (a cycle ends here too).
pub const MAX_DEPTH: usize = 16;

/// The text of `path` with every `Include` line replaced by the included file's text,
/// recursively; `None` when `path` does not exist.
///
/// # Errors
/// An include that cannot be followed (unreadable, missing, `%` expansion, nested deeper than
/// [`MAX_DEPTH`]), or `path` itself unreadable: the file and line in the message.
pub fn read(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => expand(path, &text, 0).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

fn expand(path: &Path, text: &str, depth: usize) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    for (n, line) in text.lines().enumerate() {
        let Some(name) = include_of(line) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let at = |why: String| format!("{}:{}: Include {name}: {why}", path.display(), n + 1);
        if name.contains('%') {
            return Err(at("%-expansions are not followed".into()));
        }
        if depth + 1 >= MAX_DEPTH {
            return Err(at(format!("nested more than {MAX_DEPTH} deep")));
        }
        let target = resolve(path, name);
        let inner = std::fs::read_to_string(&target)
            .map_err(|e| at(format!("{}: {e}", target.display())))?;
        out.push_str(&expand(&target, &inner, depth + 1)?);
    }
    Ok(out)
}

/// The file an `Include` line names, `None` for any other line.
pub fn include_of(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let head = t.get(..7)?;
    if !head.eq_ignore_ascii_case("include") {
        return None;
    }
    let rest = &t[7..];
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    rest.split_whitespace().next()
}

/// `name` relative to the directory of `including` (absolute names as they are).
fn resolve(including: &Path, name: &str) -> PathBuf {
    let p = Path::new(name);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    including.parent().unwrap_or(Path::new("/")).join(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_lines_are_slurms() {
        assert_eq!(include_of("Include gpus.conf"), Some("gpus.conf"));
        assert_eq!(
            include_of("  INCLUDE\t/etc/slurm/g.conf x"),
            Some("/etc/slurm/g.conf")
        );
        assert_eq!(include_of("Includes=x"), None);
        assert_eq!(include_of("include"), None);
        assert_eq!(include_of("#Include a"), None);
        assert_eq!(include_of("NodeName=n1 Name=gpu File=/dev/nvidia0"), None);
    }

    #[test]
    fn includes_are_followed_relative_to_the_including_file() {
        let dir = std::env::temp_dir().join(format!("gputopo-include-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).expect("dir");
        std::fs::write(
            dir.join("gres.conf"),
            "AutoDetect=off\nInclude sub/a.conf\nName=gpu File=/dev/nvidia9\n",
        )
        .expect("write");
        std::fs::write(dir.join("sub/a.conf"), "include b.conf\n").expect("write");
        std::fs::write(dir.join("sub/b.conf"), "Name=gpu File=/dev/nvidia3\n").expect("write");
        let text = read(&dir.join("gres.conf")).expect("read").expect("exists");
        assert_eq!(
            text,
            "AutoDetect=off\nName=gpu File=/dev/nvidia3\nName=gpu File=/dev/nvidia9\n"
        );
        assert_eq!(read(&dir.join("none.conf")), Ok(None));
        std::fs::write(dir.join("sub/b.conf"), "Include missing.conf\n").expect("write");
        let err = read(&dir.join("gres.conf")).expect_err("missing include");
        assert!(
            err.contains("a.conf:1: Include b.conf") || err.contains("b.conf:1"),
            "{err}"
        );
        assert!(err.contains("missing.conf"), "{err}");
        std::fs::write(dir.join("sub/b.conf"), "Include b.conf\n").expect("write");
        let err = read(&dir.join("gres.conf")).expect_err("a cycle");
        assert!(err.contains("nested more than"), "{err}");
        std::fs::write(dir.join("gres.conf"), "Include gres_%c.conf\n").expect("write");
        let err = read(&dir.join("gres.conf")).expect_err("%c");
        assert!(err.contains("%-expansions"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
