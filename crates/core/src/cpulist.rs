//! CPU/GPU index lists in Slurm and Linux syntax: `0-15,32,40-47`.
//!
//! Used for gres.conf `Cores=`, `--free`/`--required` lists and `IDX:` strings. Parsing never
//! panics; errors name the offending element.

/// Parses `a-b,c,...` into inclusive ranges. Whitespace around elements is ignored; an empty
/// string yields no ranges.
///
/// # Errors
/// A message naming the element that is not `N` or `N-M` with `N <= M`.
pub fn parse_ranges(s: &str) -> Result<Vec<(u32, u32)>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(Vec::new());
    }
    s.split(',')
        .map(|part| {
            let part = part.trim();
            let num = |t: &str| {
                t.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("'{part}' is not a number or a range like 0-3"))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        Err(format!("range '{part}' runs backwards"))
                    } else {
                        Ok((a, b))
                    }
                }
                None => num(part).map(|n| (n, n)),
            }
        })
        .collect()
}

/// Parses a list into its sorted, de-duplicated members, refusing lists above `limit` members
/// (a guard against `0-4294967295`).
///
/// # Errors
/// As [`parse_ranges`], or when the list is larger than `limit`.
pub fn parse_members(s: &str, limit: usize) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for (a, b) in parse_ranges(s)? {
        if (b - a) as usize >= limit || out.len() + (b - a) as usize >= limit {
            return Err(format!("list '{s}' has more than {limit} members"));
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Collapses sorted members into inclusive ranges.
pub fn to_ranges(members: impl IntoIterator<Item = u32>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for m in members {
        match out.last_mut() {
            Some((_, hi)) if m == *hi + 1 => *hi = m,
            _ => out.push((m, m)),
        }
    }
    out
}

/// Formats ranges the way Slurm prints them: `0-3,5`.
pub fn format_ranges(ranges: &[(u32, u32)]) -> String {
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let r = parse_ranges("0-3, 5,7-8").unwrap();
        assert_eq!(r, vec![(0, 3), (5, 5), (7, 8)]);
        assert_eq!(format_ranges(&r), "0-3,5,7-8");
        assert_eq!(to_ranges([0, 1, 2, 4]), vec![(0, 2), (4, 4)]);
        assert!(parse_ranges("3-1").is_err());
        assert!(parse_ranges("x").is_err());
        assert!(parse_members("0-4294967295", 4096).is_err());
        assert_eq!(parse_members("3,1-2,2", 10).unwrap(), vec![1, 2, 3]);
    }
}
