//! The text form of the report (`nvidia-smi -q`, what people paste into bug reports and
//! write-ups) read as the XML form (`-q -x`): each `Label : value` line becomes the element
//! nvidia-smi's XML names that field, so [`super::from_xml`] converts both and no rule about a
//! field lives twice.
//!
//! The text is indented by section; a label becomes its XML tag by snake case
//! (`FB Memory Usage` → `fb_memory_usage`) unless [`RENAMES`] says otherwise (the XML names
//! some fields differently, e.g. `GPU UUID` → `uuid`, `PCIe Generation/Current` →
//! `pcie_gen/current_link_gen`). A field with both a value and deeper lines (`HW Slowdown`
//! and its thermal and power-brake causes) has them as siblings, as the XML does. Elided
//! parts (`[...]`) and anything before the first `GPU <bus id>` line but the driver version
//! are skipped; what is missing stays at the fake's defaults, as for the XML form.

use std::fmt::Write as _;

/// (parent tag, snake-cased label) → the XML tag, where they differ.
const RENAMES: [(&str, &str, &str); 24] = [
    ("gpu", "gpu_uuid", "uuid"),
    ("pci", "bus_id", "pci_bus_id"),
    ("pci", "gpu_link_info", "pci_gpu_link_info"),
    ("pci_gpu_link_info", "pcie_generation", "pcie_gen"),
    ("pci_gpu_link_info", "link_width", "link_widths"),
    ("pcie_gen", "current", "current_link_gen"),
    ("pcie_gen", "max", "max_link_gen"),
    ("link_widths", "current", "current_link_width"),
    ("link_widths", "max", "max_link_width"),
    ("ecc_mode", "current", "current_ecc"),
    ("ecc_mode", "pending", "pending_ecc"),
    ("mig_mode", "current", "current_mig"),
    ("mig_mode", "pending", "pending_mig"),
    (
        "retired_pages",
        "pending_page_blacklist",
        "pending_blacklist",
    ),
    (
        "retired_pages",
        "pending_page_retirement",
        "pending_retirement",
    ),
    ("remapped_rows", "correctable_error", "remapped_row_corr"),
    ("remapped_rows", "uncorrectable_error", "remapped_row_unc"),
    ("remapped_rows", "pending", "remapped_row_pending"),
    (
        "remapped_rows",
        "remapping_failure_occurred",
        "remapped_row_failure",
    ),
    ("temperature", "gpu_current_temp", "gpu_temp"),
    ("temperature", "gpu_shutdown_temp", "gpu_temp_max_threshold"),
    (
        "temperature",
        "gpu_slowdown_temp",
        "gpu_temp_slow_threshold",
    ),
    ("fabric", "clusteruuid", "cluster_uuid"),
    ("fabric", "cliqueid", "clique_id"),
];

/// Retired-page counts are one line each in the text and an element with a `retired_count`
/// in the XML.
const RETIRED: [(&str, &str); 2] = [
    ("single_bit_ecc", "multiple_single_bit_retirement"),
    ("double_bit_ecc", "double_bit_retirement"),
];

/// Clock-event reasons as the XML names them (after the `clocks_event_reason_` prefix).
const REASONS: [(&str, &str); 2] = [
    ("idle", "gpu_idle"),
    ("display_clock_setting", "display_clocks_setting"),
];

fn snake(label: &str) -> String {
    let mut s = String::with_capacity(label.len());
    for c in label.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.is_empty() && !s.ends_with('_') {
            s.push('_');
        }
    }
    s.trim_end_matches('_').to_string()
}

fn tag(parent: &str, label: &str) -> String {
    let mut s = snake(label);
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        // Not an XML name (a MIG profile as a label): kept, under a name no rule reads.
        s.insert(0, '_');
    }
    if parent == "clocks_event_reasons" || parent == "clocks_throttle_reasons" {
        let s = REASONS
            .iter()
            .find(|r| r.0 == s)
            .map_or(s.as_str(), |r| r.1);
        let prefix = parent.trim_end_matches('s');
        return format!("{prefix}_{s}");
    }
    RENAMES
        .iter()
        .find(|r| r.0 == parent && r.1 == s)
        .map_or(s, |r| r.2.to_string())
}

fn escape(v: &str) -> String {
    v.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The `nvidia-smi -q` text `report` as an `nvidia-smi -q -x` document.
///
/// # Errors
/// No `GPU <bus id>` line.
pub(super) fn to_xml(report: &str) -> Result<String, String> {
    let mut xml = String::from("<nvidia_smi_log>\n");
    // Open sections: (indent of the label, its tag, whether its element is open).
    let mut open: Vec<(usize, String, bool)> = Vec::new();
    let mut gpus = 0;
    let close_to = |xml: &mut String, open: &mut Vec<(usize, String, bool)>, indent: usize| {
        while open.last().is_some_and(|o| o.0 >= indent) {
            if let Some((_, t, true)) = open.pop() {
                let _ = writeln!(xml, "</{t}>");
            }
        }
    };
    for line in report.lines() {
        let body = line.trim();
        if body.is_empty() || body.starts_with('=') || body.starts_with("[...]") {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if indent == 0 {
            if let Some(bus) = body.strip_prefix("GPU ").filter(|b| !b.contains(' ')) {
                close_to(&mut xml, &mut open, 0);
                let _ = writeln!(xml, "<gpu id=\"{}\">", escape(bus));
                open.push((0, "gpu".into(), true));
                gpus += 1;
                continue;
            }
        }
        close_to(&mut xml, &mut open, indent);
        if indent == 0 {
            if let Some(v) = body
                .split_once(':')
                .filter(|(k, _)| k.trim() == "Driver Version")
            {
                let _ = writeln!(
                    xml,
                    "<driver_version>{}</driver_version>",
                    escape(v.1.trim())
                );
            }
            continue;
        }
        if open.is_empty() {
            continue;
        }
        // The element this line is in: the innermost open one (a field's own deeper lines
        // are its siblings).
        let parent = open
            .iter()
            .rev()
            .find(|o| o.2)
            .map_or(String::new(), |o| o.1.clone());
        let (label, value) = match body.split_once(':') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (body, None),
        };
        let t = tag(&parent, label);
        if t.is_empty() {
            continue;
        }
        match value {
            None => {
                let _ = writeln!(xml, "<{t}>");
                open.push((indent, t, true));
            }
            Some(v) => {
                let v = escape(v);
                match RETIRED
                    .iter()
                    .find(|r| parent == "retired_pages" && r.0 == t)
                {
                    Some(r) => {
                        let _ = writeln!(xml, "<{0}><retired_count>{v}</retired_count></{0}>", r.1);
                    }
                    None => {
                        let _ = writeln!(xml, "<{t}>{v}</{t}>");
                    }
                }
                open.push((indent, t, false));
            }
        }
    }
    close_to(&mut xml, &mut open, 0);
    xml.push_str("</nvidia_smi_log>\n");
    if gpus == 0 {
        return Err("the report has no `GPU <bus id>` line".into());
    }
    Ok(xml)
}
