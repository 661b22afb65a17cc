//! Slurm's `Key=Value` line syntax, shared by every config and fixture parser in gputopo.
//!
//! Slurm config files are line based: `#` starts a comment, a line holds whitespace-separated
//! `Key=Value` words, keys are case-insensitive. Values may be double-quoted to hold spaces.
//! A word without `=` is kept with an empty value (fixture lines start with a bare kind word).

/// One `Key=Value` word of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair<'a> {
    /// The key as written.
    pub key: &'a str,
    /// The value, quotes removed; empty when the word had no `=`.
    pub value: &'a str,
    /// Whether the word had an `=`.
    pub has_value: bool,
}

/// A parse error with its 1-based line number and the field it concerns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {field}: {message}")]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// The key (field) that was wrong, or `line` for a malformed line.
    pub field: String,
    /// What is wrong, in words.
    pub message: String,
}

impl LineError {
    /// Builds an error.
    pub fn new(line: usize, field: impl Into<String>, message: impl Into<String>) -> Self {
        LineError {
            line,
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Strips a `#` comment (outside quotes) and surrounding whitespace.
pub fn strip_comment(line: &str) -> &str {
    let mut in_quotes = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_quotes = !in_quotes,
            '#' if !in_quotes => return line[..i].trim(),
            _ => {}
        }
    }
    line.trim()
}

/// Splits one (comment-free) line into its words.
///
/// # Errors
/// A message when a quote is left open.
pub fn split_pairs(line: &str) -> Result<Vec<Pair<'_>>, String> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() {
            break;
        }
        let start = i;
        let mut in_quotes = false;
        while i < bytes.len() && (in_quotes || !bytes[i].is_ascii_whitespace()) {
            if bytes[i] == b'"' {
                in_quotes = !in_quotes;
            }
            i += 1;
        }
        if in_quotes {
            return Err(format!("unterminated quote in '{}'", &line[start..]));
        }
        let word = &line[start..i];
        out.push(match word.split_once('=') {
            Some((k, v)) => {
                let v = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(v);
                Pair {
                    key: k,
                    value: v,
                    has_value: true,
                }
            }
            None => Pair {
                key: word,
                value: "",
                has_value: false,
            },
        });
    }
    Ok(out)
}

/// Iterates over the non-empty, comment-free lines of `text` with 1-based line numbers and
/// their words.
pub fn lines(text: &str) -> impl Iterator<Item = (usize, Result<Vec<Pair<'_>>, LineError>)> {
    text.lines().enumerate().filter_map(|(i, raw)| {
        let line = strip_comment(raw);
        if line.is_empty() {
            None
        } else {
            Some((
                i + 1,
                split_pairs(line).map_err(|m| LineError::new(i + 1, "line", m)),
            ))
        }
    })
}

/// The value of `key` (case-insensitive) among `words`, if present.
pub fn get<'a>(words: &[Pair<'a>], key: &str) -> Option<&'a str> {
    words
        .iter()
        .find(|p| p.key.eq_ignore_ascii_case(key))
        .map(|p| p.value)
}

/// Checks that every word is `Key=Value` with a key from `allowed` (case-insensitive).
///
/// # Errors
/// A [`LineError`] naming the first bad word.
pub fn check_keys(line: usize, words: &[Pair<'_>], allowed: &[&str]) -> Result<(), LineError> {
    for p in words {
        if !p.has_value {
            return Err(LineError::new(line, p.key, "expected Key=Value"));
        }
        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(p.key)) {
            return Err(LineError::new(
                line,
                p.key,
                format!("unknown key (allowed: {})", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

/// The value of `key` parsed as a number, `None` when absent.
///
/// # Errors
/// A [`LineError`] naming `key` when the value is not a valid number.
pub fn parse_num<T: std::str::FromStr>(
    line: usize,
    words: &[Pair<'_>],
    key: &str,
) -> Result<Option<T>, LineError> {
    get(words, key)
        .map(|v| {
            v.parse::<T>()
                .map_err(|_| LineError::new(line, key, format!("'{v}' is not a valid number")))
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_words_quotes_and_comments() {
        let p = split_pairs(strip_comment(r#"Gpu Index=0 Name="a b" # c"#)).unwrap();
        assert_eq!(p.len(), 3);
        assert!(!p[0].has_value);
        assert_eq!(p[1].value, "0");
        assert_eq!(p[2].value, "a b");
        assert!(split_pairs("A=\"x").is_err());
        let all: Vec<_> = lines("# x\n\nA=1\n").collect();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].0, 3);
    }
}
