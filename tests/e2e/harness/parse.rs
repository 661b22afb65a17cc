//! Reading Slurm's `Key=Value` output and GPU index lists.

/// The value of `Key=` in Slurm's `Key=Value` output (first occurrence, up to a space).
pub fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("{key}=");
    text.split_whitespace().find_map(|w| w.strip_prefix(&pat))
}

/// The GPU indices in `...(IDX:0-1,5)`; empty when there are none (e.g. `IDX:N/A`).
pub fn parse_idx(line: &str) -> Vec<usize> {
    let Some(start) = line.find("(IDX:") else {
        return Vec::new();
    };
    let rest = &line[start + 5..];
    let list = &rest[..rest.find(')').unwrap_or(rest.len())];
    parse_index_list(list)
}

/// "0-2,5" → [0, 1, 2, 5]; non-numeric parts are ignored.
pub fn parse_index_list(list: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(i) = part.trim().parse() {
                    out.push(i);
                }
            }
        }
    }
    out
}

#[test]
fn parses_idx_lists() {
    assert_eq!(
        parse_idx("Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:v100:3(IDX:0-1,5)"),
        vec![0, 1, 5]
    );
    assert_eq!(
        parse_idx("Nodes=n1 CPU_IDs=0 Mem=0 GRES="),
        Vec::<usize>::new()
    );
    assert_eq!(parse_index_list("4,5,7"), vec![4, 5, 7]);
    assert_eq!(
        field("JobId=3 JobState=RUNNING Reason=None", "JobState"),
        Some("RUNNING")
    );
}
