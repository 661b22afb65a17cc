//! Reading a node's GPU matrix from `nvidia-smi topo -m` output.
//!
//! Every NVIDIA machine can print this, so it is the easiest way to describe a node that has no
//! gres.conf `Links=` yet (or whose `Links=` are all zero, as Slurm's NVML autodetection writes
//! on NVSwitch boards: `topo -m` shows those pairs as `NV#`).
//!
//! The format: a header row of column names (`GPU0 .. GPUn-1`, NIC columns such as `NIC0` or
//! `mlx5_0`, then `CPU Affinity`, `NUMA Affinity`, `GPU NUMA ID`), one row per device, then a
//! legend. Cells are tab-separated (space-separated copies are accepted too, as long as each
//! cell is one word). Cells: `X` (self), `NV#` (# NVLinks, switch-routed or direct), or a PCIe
//! level `PIX`/`PXB`/`PHB`/`NODE`/`SYS` (`SOC` in old drivers, `PSB`/`SB` on some boards).
//! NIC rows and columns and the legend are ignored. `CPU Affinity` becomes the GPU's cores and
//! `NUMA Affinity` its socket (NUMA node).
//!
//! `NV#` cells hide the PCIe path; we take `NODE` for GPUs with the same NUMA node (or CPU
//! affinity) and `SYS` otherwise. The matrix must be symmetric. Every problem is a
//! [`LineError`] naming the line and the column; no input panics.

use super::{Gpu, NodeTopology, PcieLevel};
use crate::gpuset::MAX_GPUS;
use crate::keyvalue::LineError;

/// Parses `nvidia-smi topo -m` output. `name` names the resulting topology.
///
/// # Errors
/// [`LineError`] when no header is found, a GPU row is missing or repeated, a cell is not a
/// known value, the diagonal is not `X`, or the matrix is not symmetric.
pub fn parse(text: &str, name: &str) -> Result<NodeTopology, LineError> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (hline, header) = lines.by_ref().find(|(_, l)| is_header(l)).ok_or_else(|| {
        LineError::new(
            1,
            "GPU0",
            "no header row with GPU0 (is this `nvidia-smi topo -m` output?)",
        )
    })?;
    let cols = header_columns(header);
    let n = cols.iter().take_while(|c| gpu_number(c).is_some()).count();
    if n == 0 || n > MAX_GPUS {
        return Err(LineError::new(
            hline,
            "GPU0",
            format!("{n} GPU columns; expected 1 to {MAX_GPUS}"),
        ));
    }
    if let Some((i, c)) = cols
        .iter()
        .take(n)
        .enumerate()
        .find(|(i, c)| gpu_number(c) != Some(*i))
    {
        return Err(LineError::new(
            hline,
            c.as_str(),
            format!("expected GPU{i} here"),
        ));
    }
    let cpu_col = cols
        .iter()
        .position(|c| c.eq_ignore_ascii_case("CPU Affinity"));
    let numa_col = cols
        .iter()
        .position(|c| c.eq_ignore_ascii_case("NUMA Affinity"));
    let mut rows: Vec<Option<Row>> = vec![None; n];
    for (line, raw) in lines {
        let trimmed = raw.trim();
        if trimmed.starts_with("Legend") || trimmed.starts_with("NIC Legend") {
            break;
        }
        let cells = row_cells(raw);
        let Some(label) = cells.first() else { continue };
        let Some(g) = gpu_number(label) else { continue };
        if g >= n {
            return Err(LineError::new(
                line,
                label.as_str(),
                format!("no column GPU{g} in the header"),
            ));
        }
        if rows[g].is_some() {
            return Err(LineError::new(line, label.as_str(), "row repeated"));
        }
        let values = &cells[1..];
        if values.len() < n {
            return Err(LineError::new(
                line,
                label.as_str(),
                format!("{} cells, expected at least {n}", values.len()),
            ));
        }
        let mut parsed = Vec::with_capacity(n);
        for (j, v) in values.iter().take(n).enumerate() {
            let cell = parse_cell(v).ok_or_else(|| {
                LineError::new(
                    line,
                    cols[j].as_str(),
                    format!("'{v}' is not X, NV# or a PCIe level"),
                )
            })?;
            if (j == g) != (cell == Cell::Diagonal) {
                return Err(LineError::new(
                    line,
                    cols[j].as_str(),
                    "X must appear exactly on the diagonal",
                ));
            }
            parsed.push(cell);
        }
        let cores = match cpu_col.and_then(|c| values.get(c)) {
            Some(v) if !v.is_empty() && !v.eq_ignore_ascii_case("N/A") => {
                crate::cpulist::parse_members(v, 1 << 16)
                    .map_err(|m| LineError::new(line, "CPU Affinity", m))?
            }
            _ => Vec::new(),
        };
        let numa = match numa_col.and_then(|c| values.get(c)) {
            Some(v) if !v.is_empty() && !v.eq_ignore_ascii_case("N/A") => {
                Some(v.parse::<u32>().map_err(|_| {
                    LineError::new(line, "NUMA Affinity", format!("'{v}' is not a number"))
                })?)
            }
            _ => None,
        };
        rows[g] = Some((line, parsed, cores, numa));
    }
    let mut full = Vec::with_capacity(n);
    for (g, r) in rows.into_iter().enumerate() {
        full.push(
            r.ok_or_else(|| LineError::new(hline, format!("GPU{g}"), "no row for this GPU"))?,
        );
    }
    let gpus = full
        .iter()
        .enumerate()
        .map(|(index, (_, _, cores, numa))| Gpu {
            index,
            socket: *numa,
            cores: cores.clone(),
            ..Gpu::default()
        })
        .collect();
    let mut topo = NodeTopology::new(name, gpus, PcieLevel::Node)
        .map_err(|e| LineError::new(hline, "GPU0", e.to_string()))?;
    for a in 0..n {
        let (line, cells, cores_a, numa_a) = &full[a];
        for b in a + 1..n {
            let (_, other, cores_b, numa_b) = &full[b];
            if cells[b] != other[a] {
                return Err(LineError::new(
                    *line,
                    format!("GPU{b}"),
                    format!(
                        "asymmetric: GPU{a}->GPU{b} is {}, GPU{b}->GPU{a} is {}",
                        cells[b], other[a]
                    ),
                ));
            }
            let r = match cells[b] {
                Cell::Pcie(l) => topo.set_pcie(a, b, l),
                Cell::NvLink(c) => {
                    let same = match (numa_a, numa_b) {
                        (Some(x), Some(y)) => x == y,
                        _ => cores_a == cores_b,
                    };
                    topo.set_nvlinks(a, b, c).and_then(|()| {
                        topo.set_pcie(
                            a,
                            b,
                            if same {
                                PcieLevel::Node
                            } else {
                                PcieLevel::Sys
                            },
                        )
                    })
                }
                Cell::Diagonal => Ok(()),
            };
            r.map_err(|e| LineError::new(*line, format!("GPU{b}"), e.to_string()))?;
        }
    }
    Ok(topo)
}

/// True when `line` looks like the header row (a `GPU0` column name, not a row label).
pub fn is_header(line: &str) -> bool {
    let mut words = line.split_whitespace();
    let first_is_label = !line.starts_with(char::is_whitespace);
    match words.next() {
        Some("GPU0") if !first_is_label || words.next() == Some("GPU1") => {
            // A row `GPU0 X NV1 ..` has X in second place; a header has GPU1 or ends.
            !line.split_whitespace().any(|w| w == "X")
        }
        _ => false,
    }
}

/// One GPU row: its line, its GPU cells, CPU affinity and NUMA node.
type Row = (usize, Vec<Cell>, Vec<u32>, Option<u32>);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    Diagonal,
    NvLink(u8),
    Pcie(PcieLevel),
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Diagonal => f.write_str("X"),
            Cell::NvLink(c) => write!(f, "NV{c}"),
            Cell::Pcie(l) => write!(f, "{l}"),
        }
    }
}

fn parse_cell(v: &str) -> Option<Cell> {
    let v = v.trim();
    if v.eq_ignore_ascii_case("X") {
        return Some(Cell::Diagonal);
    }
    if let Some(c) = v.strip_prefix("NV") {
        return c.parse::<u8>().ok().filter(|&c| c > 0).map(Cell::NvLink);
    }
    PcieLevel::from_smi(v).map(Cell::Pcie)
}

fn gpu_number(s: &str) -> Option<usize> {
    s.strip_prefix("GPU")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) && d.len() <= 3)
        .and_then(|d| d.parse().ok())
}

/// Header column names after the (empty) corner cell. Tab-separated headers split on tabs;
/// space-separated ones on whitespace, rejoining the known two- and three-word names.
fn header_columns(line: &str) -> Vec<String> {
    if line.contains('\t') {
        return line
            .split('\t')
            .map(str::trim)
            .skip_while(|c| c.is_empty())
            .map(str::to_string)
            .collect();
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let joined = |k: usize| words.get(i..i + k).map(|w| w.join(" "));
        if let Some(j) = joined(3).filter(|j| j.eq_ignore_ascii_case("GPU NUMA ID")) {
            out.push(j);
            i += 3;
        } else if let Some(j) = joined(2).filter(|j| {
            j.eq_ignore_ascii_case("CPU Affinity") || j.eq_ignore_ascii_case("NUMA Affinity")
        }) {
            out.push(j);
            i += 2;
        } else {
            out.push(words[i].to_string());
            i += 1;
        }
    }
    out
}

/// A row's cells, label first.
fn row_cells(line: &str) -> Vec<String> {
    if line.contains('\t') {
        line.split('\t').map(|c| c.trim().to_string()).collect()
    } else {
        line.split_whitespace().map(str::to_string).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::nvlink_matrix;
    use proptest::prelude::*;

    const DGX1V: &str = include_str!("../../../../tests/fixtures/topologies/dgx1v-topo-m.txt");

    #[test]
    fn reads_the_shipped_dgx1v_sample() {
        let t = parse(DGX1V, "dgx1v").unwrap();
        let f = crate::fixtures::dgx1v();
        assert_eq!(t.len(), 8);
        assert_eq!(nvlink_matrix(&t), nvlink_matrix(&f));
        assert_eq!(t.gpus()[0].cores.len(), 40);
        assert_eq!(t.gpus()[5].socket, Some(1));
        assert_eq!(t.link(0, 5).pcie, PcieLevel::Sys);
        assert_eq!(t.link(0, 1).pcie, PcieLevel::Node);
    }

    #[test]
    fn space_separated_copy_and_pcie_levels() {
        let text = "        GPU0  GPU1  GPU2  CPU Affinity  NUMA Affinity\n\
                    GPU0     X    PIX   SOC   0-7           0\n\
                    GPU1    PIX    X    SYS   0-7           0\n\
                    GPU2    SOC   SYS    X    8-15          1\n\nLegend:\n  X = Self\n";
        let t = parse(text, "p").unwrap();
        assert_eq!(t.link(0, 1).pcie, PcieLevel::Pix);
        assert_eq!(t.link(0, 2).pcie, PcieLevel::Sys);
        assert_eq!(t.gpus()[2].cores, (8..16).collect::<Vec<_>>());
    }

    #[test]
    fn errors_name_line_and_column() {
        let asym = "\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tNV1\t X \n";
        let e = parse(asym, "a").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "GPU1"), "{e}");
        let bad = "\tGPU0\tGPU1\nGPU0\t X \tQQQ\nGPU1\tPIX\t X \n";
        let e = parse(bad, "a").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "GPU1"));
        let missing = "\tGPU0\tGPU1\nGPU0\t X \tPIX\n";
        assert_eq!(parse(missing, "a").unwrap_err().field, "GPU1");
        let diag = "\tGPU0\tGPU1\nGPU0\tPIX\tPIX\nGPU1\tPIX\t X \n";
        assert_eq!(parse(diag, "a").unwrap_err().field, "GPU0");
        assert!(parse("hello", "a").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,300}") {
            let _ = parse(&text, "x");
        }

        #[test]
        fn never_panics_on_matrix_like_text(rows in proptest::collection::vec(
            proptest::collection::vec("( X |NV[0-9]{1,3}|PIX|SYS|NODE|PHB|SOC|GPU[0-9]|0-[0-9]|N/A|)", 0..6), 0..6)) {
            let mut text = String::from("\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n");
            for (i, r) in rows.iter().enumerate() {
                text.push_str(&format!("GPU{i}\t{}\n", r.join("\t")));
            }
            let _ = parse(&text, "x");
        }
    }
}
