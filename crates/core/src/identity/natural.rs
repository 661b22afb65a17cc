//! Natural string order (`strnatcmp`, which Slurm uses to sort GPUs by device file):
//! runs of digits compare as numbers, so `/dev/nvidia2` < `/dev/nvidia10`.

use std::cmp::Ordering;

/// Compares `a` and `b` in natural order.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let (nx, rx) = digits(x);
                let (ny, ry) = digits(y);
                let ord = nx
                    .trim_start_matches('0')
                    .len()
                    .cmp(&ny.trim_start_matches('0').len())
                    .then_with(|| nx.trim_start_matches('0').cmp(ny.trim_start_matches('0')));
                if ord != Ordering::Equal {
                    return ord;
                }
                (x, y) = (rx, ry);
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                (x, y) = (&x[1..], &y[1..]);
            }
        }
    }
}

/// The leading run of digits of `s` (as text) and the rest.
fn digits(s: &[u8]) -> (&str, &[u8]) {
    let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
    (std::str::from_utf8(&s[..n]).unwrap_or(""), &s[n..])
}
