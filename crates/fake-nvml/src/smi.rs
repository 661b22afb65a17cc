//! `nvidia-smi -q -x` reports → fake-NVML fixtures, so the fake answers what real boards
//! answered (issue 27 item 3). Every value nvidia-smi prints as `N/A` or `[N/A]` (NVML said
//! "not supported") becomes the fixture's "not supported" (`Ecc=unsupported`,
//! `Remap=unsupported`, `RetiredPending=unsupported`, a telemetry field left out, no `Mig=`).
//!
//! What a report does not hold is left at the fake's defaults and said in the header: NVLink
//! ports (`nvidia-smi -q` has none; `nvidia-smi nvlink -s` does), CPU affinity, XID events.
//! A MIG device's profile is not in the report either: it is derived from its multiprocessors
//! (14 per slice on A100, 16 on H100/H200/B200) and memory (rounded up to GB), e.g. `1g.20gb`.
//! Reports of schema v11 (`power_readings`, `clocks_throttle_reasons`, ECC `single_bit`/
//! `double_bit`) and v12/v13 (`gpu_power_readings`, `clocks_event_reasons`, `sram_*`/`dram_*`)
//! are read alike. The text form (`nvidia-smi -q`) is read as the XML form ([`text`]). A
//! section missing from a report means "not supported" (old schemas leave them out), except
//! in an excerpt (text with `[...]`), where it is only not shown: the fake's default stands.

use roxmltree::{Document, Node};
use std::fmt::Write as _;

type El<'a> = Node<'a, 'a>;

fn child<'a>(n: El<'a>, name: &str) -> Option<El<'a>> {
    n.children().find(|c| c.has_tag_name(name))
}

fn path<'a>(n: El<'a>, p: &str) -> Option<El<'a>> {
    p.split('/').try_fold(n, child)
}

/// The text at `p`, `None` when absent or N/A.
fn text<'a>(n: El<'a>, p: &str) -> Option<&'a str> {
    let t = path(n, p)?.text()?.trim();
    (!t.is_empty() && !t.contains("N/A")).then_some(t)
}

/// The leading number of the text at `p` (`"27 C"`, `"67.03 W"`, `"16x"`).
fn number(n: El<'_>, p: &str) -> Option<f64> {
    let t = text(n, p)?;
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    t[..end].parse().ok()
}

fn int(n: El<'_>, p: &str) -> Option<u64> {
    number(n, p).map(|v| v.round() as u64)
}

/// `Yes`/`Enabled`/`Active` → true, `No`/`Disabled`/`Not Active` → false.
fn yes(n: El<'_>, p: &str) -> Option<bool> {
    match text(n, p)?.to_ascii_lowercase().as_str() {
        "yes" | "enabled" | "active" => Some(true),
        "no" | "disabled" | "not active" => Some(false),
        _ => None,
    }
}

/// NVML's `nvmlClocksEventReason*` bits by nvidia-smi's element name (after the prefix).
const REASONS: [(&str, u64); 9] = [
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("display_clocks_setting", 0x100),
];

/// One GPU's `Gpu`, `Telemetry` and `Mig` lines; `excerpt`: a missing section is not shown,
/// rather than not supported.
fn gpu(g: El<'_>, i: usize, excerpt: bool, out: &mut String) {
    let shown = |name: &str| !excerpt || child(g, name).is_some();
    let bus = text(g, "pci/pci_bus_id")
        .or_else(|| g.attribute("id"))
        .unwrap_or("");
    let mut line = format!("Gpu Index={i} BusId={bus}");
    if let Some(v) = text(g, "uuid") {
        let _ = write!(line, " Uuid={v}");
    }
    let _ = write!(
        line,
        " Minor={}",
        int(g, "minor_number").unwrap_or(i as u64)
    );
    if let Some(v) = text(g, "product_name") {
        let _ = write!(line, " Name=\"{v}\"");
    }
    let ecc = match yes(g, "ecc_mode/current_ecc") {
        Some(true) => Some("on"),
        Some(false) => Some("off"),
        None => shown("ecc_mode").then_some("unsupported"),
    };
    if let Some(ecc) = ecc {
        let _ = write!(line, " Ecc={ecc}");
    }
    for (key, kind) in [("Vol", "volatile"), ("Agg", "aggregate")] {
        let (unc, cor) = ecc_counts(g, kind);
        if unc > 0 {
            let _ = write!(line, " EccUnc{key}={unc}");
        }
        if cor > 0 {
            let _ = write!(line, " EccCor{key}={cor}");
        }
    }
    match yes(g, "retired_pages/pending_retirement")
        .or_else(|| yes(g, "retired_pages/pending_blacklist"))
    {
        Some(true) => line.push_str(" RetiredPending=yes"),
        Some(false) => {}
        None if shown("retired_pages") => {
            line.push_str(" RetiredPending=unsupported");
        }
        None => {}
    }
    for (key, p) in [
        (
            "RetiredDbe",
            "retired_pages/double_bit_retirement/retired_count",
        ),
        (
            "RetiredSbe",
            "retired_pages/multiple_single_bit_retirement/retired_count",
        ),
    ] {
        let n = int(g, p).unwrap_or(0);
        if n > 0 {
            let pages: Vec<String> = (1..=n.min(64))
                .map(|k| format!("0x{:x}", k << 12))
                .collect();
            let _ = write!(line, " {key}={}", pages.join(","));
        }
    }
    let remap = match child(g, "remapped_rows").filter(|r| r.children().any(|c| c.is_element())) {
        Some(r) => Some(format!(
            "{},{},{},{}",
            int(r, "remapped_row_corr").unwrap_or(0),
            int(r, "remapped_row_unc").unwrap_or(0),
            u8::from(yes(r, "remapped_row_pending").unwrap_or(false)),
            u8::from(yes(r, "remapped_row_failure").unwrap_or(false))
        )),
        None => shown("remapped_rows").then(|| "unsupported".to_string()),
    };
    if let Some(remap) = remap {
        let _ = write!(line, " Remap={remap}");
    }
    if let Some(m) = int(g, "fb_memory_usage/total") {
        let _ = write!(line, " MemMiB={m}");
    }
    if let Some(cc) = text(g, "compute_cap") {
        let _ = write!(line, " Cc={cc}");
    }
    let mig =
        child(g, "mig_mode").and_then(|m| Some((yes(m, "current_mig")?, yes(m, "pending_mig"))));
    if let Some((cur, pending)) = mig {
        let on = |b: bool| if b { "on" } else { "off" };
        let v = match pending {
            Some(p) if p != cur => format!("{}>{}", on(cur), on(p)),
            _ => on(cur).to_string(),
        };
        let _ = write!(line, " Mig={v}");
    }
    out.push_str(&line);
    out.push('\n');
    telemetry(g, i, out);
    if mig.is_some_and(|(cur, _)| cur) {
        let sm_per_slice =
            if text(g, "product_name").is_some_and(|n| n.contains("A100") || n.contains("A30")) {
                14.0
            } else {
                16.0
            };
        for d in child(g, "mig_devices")
            .into_iter()
            .flat_map(|m| m.children().filter(|c| c.has_tag_name("mig_device")))
        {
            let (Some(gi), Some(ci)) = (int(d, "gpu_instance_id"), int(d, "compute_instance_id"))
            else {
                continue;
            };
            let sms =
                number(d, "device_attributes/shared/multiprocessor_count").unwrap_or(sm_per_slice);
            let slices = (sms / sm_per_slice).round().max(1.0) as u64;
            let gb =
                number(d, "fb_memory_usage/total").map_or(5, |mib| (mib / 1024.0).ceil() as u64);
            let _ = writeln!(out, "Mig Gpu={i} Gi={gi} Ci={ci} Profile={slices}g.{gb}gb");
        }
    }
}

/// (uncorrectable, correctable) ECC errors of `kind` (`volatile`, `aggregate`): v12+ sums the
/// `sram_*`/`dram_*` counters, v11 reads `double_bit`/`single_bit` `total`.
fn ecc_counts(g: El<'_>, kind: &str) -> (u64, u64) {
    let Some(e) = path(g, &format!("ecc_errors/{kind}")) else {
        return (0, 0);
    };
    if child(e, "double_bit").is_some() {
        return (
            int(e, "double_bit/total").unwrap_or(0),
            int(e, "single_bit/total").unwrap_or(0),
        );
    }
    let (mut unc, mut cor) = (0, 0);
    for c in e.children().filter(Node::is_element) {
        let name = c.tag_name().name();
        let v = int(e, name).unwrap_or(0);
        if name.contains("uncorrectable") {
            unc += v;
        } else if name.contains("correctable") {
            cor += v;
        }
    }
    (unc, cor)
}

/// The `Telemetry` line: whatever the report has of heat, power, clock-event reasons, PCIe.
fn telemetry(g: El<'_>, i: usize, out: &mut String) {
    let mut t = String::new();
    for (key, p) in [
        ("Temp", "temperature/gpu_temp"),
        ("Slowdown", "temperature/gpu_temp_slow_threshold"),
        ("Shutdown", "temperature/gpu_temp_max_threshold"),
    ] {
        if let Some(v) = int(g, p) {
            let _ = write!(t, " {key}={v}");
        }
    }
    let power = child(g, "gpu_power_readings").or_else(|| child(g, "power_readings"));
    if let Some(p) = power {
        if let Some(v) = int(p, "power_draw").or_else(|| int(p, "average_power_draw")) {
            let _ = write!(t, " PowerW={v}");
        }
        if let Some(v) = int(p, "enforced_power_limit").or_else(|| int(p, "current_power_limit")) {
            let _ = write!(t, " PowerLimitW={v}");
        }
    }
    let reasons = child(g, "clocks_event_reasons").or_else(|| child(g, "clocks_throttle_reasons"));
    if let Some(r) = reasons {
        let mut mask = 0u64;
        let mut any = false;
        for c in r.children().filter(Node::is_element) {
            let name = c.tag_name().name();
            let short = name
                .strip_prefix("clocks_event_reason_")
                .or_else(|| name.strip_prefix("clocks_throttle_reason_"))
                .unwrap_or(name);
            if let (Some(bit), Some(on)) = (REASONS.iter().find(|x| x.0 == short), yes(r, name)) {
                any = true;
                if on {
                    mask |= bit.1;
                }
            }
        }
        if any {
            let _ = write!(t, " ClockEvents=0x{mask:x}");
        }
    }
    let link = "pci/pci_gpu_link_info";
    if let (Some(c), Some(m)) = (
        int(g, &format!("{link}/pcie_gen/current_link_gen")),
        int(g, &format!("{link}/pcie_gen/max_link_gen")),
    ) {
        let _ = write!(t, " PcieGen={c}/{m}");
    }
    if let (Some(c), Some(m)) = (
        int(g, &format!("{link}/link_widths/current_link_width")),
        int(g, &format!("{link}/link_widths/max_link_width")),
    ) {
        let _ = write!(t, " PcieWidth={c}/{m}");
    }
    if !t.is_empty() {
        let _ = writeln!(out, "Telemetry Gpu={i}{t}");
    }
}

/// Converts an `nvidia-smi -q -x` report to a fixture named `name`; `header` lines (source,
/// licence) go first as comments.
///
/// # Errors
/// Not XML, or not an `nvidia_smi_log` with at least one `gpu`.
pub fn from_xml(xml: &str, name: &str, header: &[String]) -> Result<String, String> {
    convert(xml, name, header, false)
}

/// [`from_xml`]; `excerpt`: see [`gpu`].
fn convert(xml: &str, name: &str, header: &[String], excerpt: bool) -> Result<String, String> {
    // The DTD line names a file that is not there; roxmltree ignores external DTDs.
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = Document::parse_with_options(xml, opts).map_err(|e| format!("not XML: {e}"))?;
    let root = doc.root_element();
    if !root.has_tag_name("nvidia_smi_log") {
        return Err(format!(
            "<{}> is not <nvidia_smi_log>",
            root.tag_name().name()
        ));
    }
    let gpus: Vec<El<'_>> = root.children().filter(|c| c.has_tag_name("gpu")).collect();
    if gpus.is_empty() {
        return Err("the report lists no <gpu>".into());
    }
    let mut out = String::new();
    for h in header {
        let _ = writeln!(out, "# {h}");
    }
    out.push_str(
        "# Converted by fake-nvml-from-smi: NVLink ports, CPU affinity and XID events are not in\n\
         # nvidia-smi -q, so they are the fake's defaults (no NVLink, no affinity, events supported).\n",
    );
    let mut node = format!("Node Name={name} Gpus={}", gpus.len());
    if let Some(d) = text(root, "driver_version") {
        let _ = write!(node, " Driver={d}");
    }
    if let Some(f) = fabric(gpus[0]) {
        let _ = write!(node, " {f}");
    }
    out.push_str(&node);
    out.push('\n');
    for (i, g) in gpus.iter().enumerate() {
        gpu(*g, i, excerpt, &mut out);
    }
    Ok(out)
}

/// Converts an `nvidia-smi -q` (text) report to a fixture named `name`, as [`from_xml`].
///
/// # Errors
/// No `GPU <bus id>` line in it.
pub fn from_text(report: &str, name: &str, header: &[String]) -> Result<String, String> {
    convert(
        &text::to_xml(report)?,
        name,
        header,
        report.contains("[...]"),
    )
}

/// [`from_xml`] or [`from_text`], by the report's first character (`<`: XML).
///
/// # Errors
/// As theirs.
pub fn from_report(report: &str, name: &str, header: &[String]) -> Result<String, String> {
    if report.trim_start().starts_with('<') {
        from_xml(report, name, header)
    } else {
        from_text(report, name, header)
    }
}

/// `FabricCluster= FabricClique=` of a GPU whose fabric registration completed.
fn fabric(g: El<'_>) -> Option<String> {
    let f = child(g, "fabric")?;
    if !text(f, "state")?.eq_ignore_ascii_case("completed") {
        return None;
    }
    let cluster: String = text(f, "cluster_uuid")?
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect();
    let clique = int(f, "clique_id")?;
    (cluster.len() == 32).then(|| format!("FabricCluster={cluster} FabricClique={clique}"))
}

mod text;

#[cfg(test)]
mod tests;
