//! The Grafana dashboard (contrib/grafana/gputopo-fleet.json) and the alert rules
//! (contrib/prometheus/gputopo-alerts.yml) use only what `gputopo metrics` exposes, and the
//! dashboard is a well-formed Grafana model. That every query returns data from a real
//! Prometheus is tests/e2e/metrics.rs.

use gputopo_agent::fleet::metrics::{Format, render};
use gputopo_agent::fleet::view::Cluster;
use std::collections::BTreeSet;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every metric name `gputopo metrics` can write (its `# TYPE` lines, with a drained GPU so
/// the drain families have their series too).
fn exposed() -> BTreeSet<String> {
    let nodes = concat!(
        "NodeName=n1 Gres=gpu:2 GresUsed=gpu:0(IDX:N/A) State=IDLE ",
        r#"Extra={"gputopo":{"v":1,"gpus":[{"i":0,"s":"ok"},{"i":1,"s":"ok"}],"t":1},"gputopo_drain":{"v":1,"gpus":[{"i":1,"r":"x","u":"y","t":2}]}}"#,
    );
    render(Some(Cluster::read(nodes, "")), Format::Prometheus)
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

/// The `gputopo_*` names in a PromQL expression.
fn names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("gputopo_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// Every PromQL expression of the dashboard, with its panel's title.
pub fn dashboard_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo().join("contrib/grafana/gputopo-fleet.json"))
        .expect("the dashboard");
    let d: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push((
                p["title"].as_str().unwrap_or("").to_string(),
                t["expr"].as_str().expect("an expr").to_string(),
            ));
        }
    }
    out
}

#[test]
fn the_dashboard_is_a_grafana_model_built_on_gputopo_metrics_only() {
    let text = std::fs::read_to_string(repo().join("contrib/grafana/gputopo-fleet.json"))
        .expect("the dashboard");
    let d: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(d["uid"], "gputopo-fleet");
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 36));
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .expect("variables")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(vars, ["datasource", "node"]);
    let mut ids = BTreeSet::new();
    for p in d["panels"].as_array().expect("panels") {
        assert!(
            ids.insert(p["id"].as_u64().expect("an id")),
            "ids are unique"
        );
        for k in ["x", "y", "w", "h"] {
            assert!(p["gridPos"][k].as_u64().is_some(), "{p}");
        }
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        assert!(
            !p["description"].as_str().unwrap_or("").is_empty(),
            "{}",
            p["title"]
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty());
        for t in targets {
            assert!(t["refId"].as_str().is_some());
        }
    }
    let exposed = exposed();
    let queries = dashboard_queries();
    assert!(queries.len() >= 15, "{}", queries.len());
    for (title, q) in &queries {
        let used = names(q);
        assert!(!used.is_empty(), "{title}: {q} uses no gputopo metric");
        for n in used {
            assert!(exposed.contains(&n), "{title}: {n} is not a gputopo metric");
        }
    }
}

#[test]
fn the_alert_rules_use_gputopo_metrics_only() {
    let text = std::fs::read_to_string(repo().join("contrib/prometheus/gputopo-alerts.yml"))
        .expect("the rules");
    let exposed = exposed();
    let exprs: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("expr: "))
        .collect();
    assert_eq!(exprs.len(), text.matches("- alert: ").count());
    for e in exprs {
        for n in names(e) {
            assert!(exposed.contains(&n), "{e}: {n} is not a gputopo metric");
        }
    }
}
