//! Telling the three topology inputs apart, so `--topology FILE` accepts any of them.
//!
//! - gputopo's fixture format ([`super::fixture`]): the first meaningful line starts with the
//!   bare word `Node`.
//! - `nvidia-smi topo -m` output ([`super::smi`]): a header row of `GPU0 GPU1 ..` columns.
//! - Slurm gres.conf ([`super::gres_conf_parse`]): `Name=`, `NodeName=` or `AutoDetect=` keys.
//!
//! Detection looks only at the content (not the file name), and never panics.

use super::{NodeTopology, fixture, gres_conf_parse, smi};
use crate::keyvalue::{self, LineError};
use std::fmt;

/// A topology input format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// gputopo's own `Node`/`Gpu`/`NvLink`/`Pcie` lines.
    Fixture,
    /// Slurm gres.conf.
    GresConf,
    /// `nvidia-smi topo -m` output.
    NvidiaSmi,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Fixture => "gputopo topology file",
            Format::GresConf => "gres.conf",
            Format::NvidiaSmi => "nvidia-smi topo -m output",
        })
    }
}

/// Why a topology input could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReadError {
    /// The content matches none of the formats.
    #[error(
        "not a topology: expected a gputopo topology file (Node ... line), gres.conf (Name=gpu lines) or nvidia-smi topo -m output"
    )]
    Unrecognised,
    /// The content was recognised but is invalid.
    #[error("{format}: {error}")]
    Invalid {
        /// The detected format.
        format: Format,
        /// The first problem, with its line and field.
        #[source]
        error: LineError,
    },
}

/// The format of `text`, if it looks like one.
pub fn detect(text: &str) -> Option<Format> {
    if text.lines().any(smi::is_header) {
        return Some(Format::NvidiaSmi);
    }
    let mut first = true;
    for (_, words) in keyvalue::lines(text) {
        let Ok(words) = words else { continue };
        if first
            && words
                .first()
                .is_some_and(|w| !w.has_value && w.key.eq_ignore_ascii_case("node"))
        {
            return Some(Format::Fixture);
        }
        first = false;
        if words.iter().any(|w| {
            w.has_value
                && ["Name", "NodeName", "AutoDetect"]
                    .iter()
                    .any(|k| w.key.eq_ignore_ascii_case(k))
        }) {
            return Some(Format::GresConf);
        }
    }
    None
}

/// Detects the format of `text` and parses it. `node` selects the node's lines in a
/// gres.conf and names the topology of an `nvidia-smi` matrix (default `node`).
///
/// # Errors
/// [`ReadError`] when the format is unknown or the content invalid.
pub fn read(text: &str, node: Option<&str>) -> Result<(Format, NodeTopology), ReadError> {
    let format = detect(text).ok_or(ReadError::Unrecognised)?;
    let parsed = match format {
        Format::Fixture => fixture::parse(text),
        Format::GresConf => gres_conf_parse::parse(text, node),
        Format::NvidiaSmi => smi::parse(text, node.unwrap_or("node")),
    };
    parsed
        .map(|t| (format, t))
        .map_err(|error| ReadError::Invalid { format, error })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn detects_each_shipped_sample() {
        let cases = [
            (
                include_str!("../../../../contrib/topologies/dgx1v.topo"),
                Format::Fixture,
            ),
            (
                include_str!("../../../../tests/fixtures/topologies/dgx1v-gres.conf"),
                Format::GresConf,
            ),
            (
                include_str!("../../../../tests/fixtures/topologies/dgx1v-topo-m.txt"),
                Format::NvidiaSmi,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(detect(text), Some(want));
            let (f, t) = read(text, Some("dgx02")).unwrap();
            assert_eq!((f, t.len()), (want, 8));
        }
        assert_eq!(read("hello world", None), Err(ReadError::Unrecognised));
        let e = read("Node Name=x Gpus=0\n", None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("gputopo topology file: line 1: Gpus:"),
            "{e}"
        );
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,300}") {
            let _ = read(&text, None);
            let _ = read(&text, Some("n1"));
        }

        #[test]
        fn never_panics_on_fixture_like_text(lines in proptest::collection::vec(
            "(Node|Gpu|NvLink|Pcie) (Name=x |Gpus=[0-9]{1,2} |Index=[0-9]{1,2} |Count=[0-9]{1,3} |Level=(PIX|SYS|Q) |SwitchLinks=[0-9]{1,3} |Cores=[0-9,-]{0,4} )*",
            0..8,
        )) {
            let _ = read(&lines.join("\n"), None);
        }
    }
}
