//! The read-back states without Slurm: the directory is set by hand (slurmctld's
//! `StateSaveLocation` in production) and the writer thread is not started, so each look and
//! write runs here, in order. One test: the module's state is process-wide.

use std::os::unix::fs::MetadataExt;

use super::*;

const FAULTY_3: &str = r#"{"gputopo":{"v":1,"gpus":[{"i":0,"s":"ok"},{"i":3,"s":"faulty","r":["ecc_uncorrectable"]}]}}"#;

/// Writes what is remembered, as the thread would.
fn flush() {
    let out = {
        let mut g = lock();
        g.dirty = false;
        snapshot(&g)
    };
    if let Some(out) = out {
        write(out);
    }
}

fn file(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join(HEALTH_FILE)).ok()
}

#[test]
fn read_back_states_fail_closed() {
    let tmp = std::env::temp_dir().join(format!("gputopo-persist-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let owner = std::fs::metadata(&tmp).expect("temp dir").uid();
    {
        let mut g = lock();
        g.dir = Some(tmp.clone());
        g.owner = owner;
    }

    // No file yet: nothing to read back; what is remembered is written.
    read_file();
    assert_eq!(read_back(), ReadBack::Done);
    remember("n1", FAULTY_3);
    flush();
    assert!(file(&tmp).is_some_and(|t| t.contains("n1")));

    // Corrupt: set aside, memory kept and written again, but what the file held is lost, so
    // damaged nodes this process has not seen good are withheld.
    std::fs::write(tmp.join(HEALTH_FILE), r#"{"v":1,"nodes":{"n1""#).expect("corrupt");
    read_file();
    assert_eq!(read_back(), ReadBack::Lost);
    let aside = std::fs::read_dir(&tmp)
        .expect("dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
        .count();
    assert_eq!(aside, 1, "the corrupt file is kept as evidence");
    flush();
    assert!(
        file(&tmp).is_some_and(|t| t.contains("n1")),
        "written in its place"
    );
    // A reconfigure that finds this process's own file changes nothing: still lost.
    read_file();
    assert_eq!(read_back(), ReadBack::Lost);

    // Unreadable (a directory in its place): withheld, and never written over.
    std::fs::remove_file(tmp.join(HEALTH_FILE)).expect("remove");
    std::fs::create_dir(tmp.join(HEALTH_FILE)).expect("a directory in its place");
    read_file();
    assert_eq!(read_back(), ReadBack::Failed);
    remember("n2", FAULTY_3);
    flush();
    assert!(
        tmp.join(HEALTH_FILE).is_dir(),
        "not written while unreadable"
    );

    // A good file the other controller wrote: it replaces memory, ends the loss, and the hooks
    // take its records (withheld meanwhile) before nodes may use them.
    std::fs::remove_dir(tmp.join(HEALTH_FILE)).expect("remove the directory");
    let mut other = HealthStore::new();
    other
        .remember("n7", FAULTY_3, now())
        .expect("a good record");
    std::fs::write(tmp.join(HEALTH_FILE), other.to_json()).expect("the other controller's file");
    read_file();
    assert!(pending());
    assert_eq!(read_back(), ReadBack::Pending);
    let update = take().expect("an update");
    let seeds = update.seeds.expect("a file read seeds the cache");
    assert_eq!(seeds.len(), 1);
    assert_eq!(seeds[0].0, "n7");
    assert_eq!(read_back(), ReadBack::Done);
    assert!(take().is_none());

    lock().dir = None;
    let _ = std::fs::remove_dir_all(&tmp);
}
