use super::*;
use crate::health::{Status, read_extra};
use std::fs;
use std::os::unix::fs::MetadataExt;

const FAULTY_3: &str = r#"{"gpu_faulty":"3","gputopo":{"v":1,"gpus":[{"i":3,"s":"faulty","r":["ecc_uncorrectable"]}]}}"#;

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gputopo-health-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).expect("tmpdir");
    d
}

#[test]
fn round_trip_keeps_the_text_that_read_extra_parses_again() {
    let dir = tmpdir("rt");
    let mut s = HealthStore::new();
    assert_eq!(s.remember("n1", FAULTY_3, 10), Ok(true));
    assert_eq!(s.remember("n1", FAULTY_3, 20), Ok(false), "unchanged");
    assert_eq!(s.get("n1").map(|x| x.t), Some(10));
    write(&dir, &s.to_json(), None).expect("write");
    assert_eq!(
        fs::metadata(dir.join(HEALTH_FILE)).expect("file").mode() & 0o777,
        0o600
    );
    let back = load(&dir, 99).expect("load");
    assert!(back.problems.is_empty() && back.set_aside.is_none());
    assert_eq!(back.store, s);
    let text = &back.store.get("n1").expect("n1").extra;
    let parsed = read_extra(text).expect("ours").expect("health");
    assert_eq!(
        parsed.health.with_status(Status::Faulty).to_vec(),
        vec![3usize]
    );
    fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn forget_and_bounds() {
    let mut s = HealthStore::new();
    s.remember("n1", FAULTY_3, 1).expect("kept");
    let long = "x".repeat(MAX_EXTRA_BYTES + 1);
    assert_eq!(
        s.remember("n1", &long, 2),
        Err(NotKept::TooLong(MAX_EXTRA_BYTES + 1))
    );
    assert_eq!(s.get("n1").map(|x| x.extra.as_str()), Some(FAULTY_3));
    assert!(s.forget("n1"));
    assert!(!s.forget("n1"));
    assert!(s.is_empty());
}

#[test]
fn a_file_past_the_bounds_drops_records_not_the_file() {
    let long = "x".repeat(MAX_EXTRA_BYTES + 1);
    let text = format!(
        r#"{{"v":1,"nodes":{{"a":{{"extra":"{long}","t":1}},"b":{{"extra":"y","t":2}}}}}}"#
    );
    let (s, problems) = HealthStore::from_json(&text).expect("parses");
    assert_eq!(s.len(), 1);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("node a:"), "{problems:?}");
}

#[test]
fn corrupt_or_foreign_files_are_set_aside_and_read_as_empty() {
    for (tag, bad) in [
        ("trunc", &br#"{"v":1,"nodes":{"n1":{"ext"#[..]),
        ("version", br#"{"v":2,"nodes":{}}"#),
        ("utf8", b"\xff\xfe"),
        ("shape", br#"{"v":1,"nodes":[]}"#),
    ] {
        let dir = tmpdir(tag);
        fs::write(dir.join(HEALTH_FILE), bad).expect("write");
        let back = load(&dir, 5).expect("set aside");
        let (aside, why) = back.set_aside.expect("set aside");
        assert_eq!(aside, dir.join(format!("{HEALTH_FILE}.corrupt-5")), "{tag}");
        assert!(!why.is_empty(), "{tag}");
        assert_eq!(fs::read(&aside).expect("kept"), bad, "{tag}: evidence kept");
        assert!(back.store.is_empty(), "{tag}");
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}

#[test]
fn missing_file_is_empty_and_unreadable_dir_is_an_error() {
    let dir = tmpdir("missing");
    let back = load(&dir, 1).expect("missing is fine");
    assert!(back.store.is_empty() && back.set_aside.is_none());
    // A directory where the file should be cannot be read: an error, never "empty".
    fs::create_dir(dir.join(HEALTH_FILE)).expect("mkdir");
    assert!(load(&dir, 1).is_err());
    fs::remove_dir_all(&dir).expect("cleanup");
}
