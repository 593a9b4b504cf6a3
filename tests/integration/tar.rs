//! tar at many members: runs of entries are grouped into lazy `entries`
//! nodes (so ten million members do not hold ten million nodes), and a group
//! opens to exactly the members Python's tarfile lists, long names and PAX
//! headers included, in whole and cut archives.

use crate::util::{fixture, parse};
use pparse::engine::Session;
use pparse::node::Children;
use std::io::Read;

/// (header offset, data offset, size, name) from the fixture's `.list`.
fn reference(list: &str) -> Vec<(u64, u64, u64, String)> {
    String::from_utf8(fixture(list))
        .unwrap()
        .lines()
        .map(|l| {
            let mut f = l.splitn(4, ' ');
            let mut n = || f.next().unwrap().to_string();
            let (a, b, c, d) = (n(), n(), n(), n());
            (
                a.parse().unwrap(),
                b.parse().unwrap(),
                c.parse().unwrap(),
                d,
            )
        })
        .collect()
}

/// Every entry node of extraction `id`, groups opened: (start, end, name),
/// and the number of groups.
fn entries(session: &Session, id: usize) -> (Vec<(u64, u64, String)>, usize) {
    let count = session.tree().exts[id].nodes.len();
    let mut out = Vec::new();
    let mut groups = 0;
    for i in 0..count {
        let kind = session.tree().exts[id].nodes[i].kind;
        match kind {
            "entries" => {
                groups += 1;
                assert!(session.load(id, &[i]), "group {i} does not load");
                let t = session.tree();
                let Children::Loaded(kids) = &t.exts[id].nodes[i].children else {
                    panic!("group {i} has no children after a load");
                };
                let n = &t.exts[id].nodes[i];
                assert_eq!(
                    n.value,
                    Some(pparse::node::Value::UInt(kids.len() as u64)),
                    "a group says how many entries it holds"
                );
                assert!(kids.len() <= 1024, "a group holds at most 1024 entries");
                for k in kids {
                    assert_eq!(k.kind, "entry");
                    out.push((k.range.start, k.range.end, k.name.to_string()));
                }
            }
            "entry" => {
                let n = &session.tree().exts[id].nodes[i];
                out.push((n.range.start, n.range.end, n.name.to_string()));
            }
            _ => {}
        }
    }
    (out, groups)
}

fn check(archive: &str, list: &str) {
    let want = reference(list);
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(&fixture(archive)[..])
        .read_to_end(&mut tar)
        .unwrap();
    let session = parse("many.tar", tar.clone());
    let (got, groups) = entries(&session, 0);
    assert_eq!(groups, 2, "{archive}: 2,100 small members make two groups");
    assert_eq!(got.len(), want.len(), "{archive}: member count");
    for ((start, end, name), (off, data, size, wname)) in got.iter().zip(&want) {
        assert_eq!(start, off, "{archive}: header offset of {wname}");
        assert_eq!(
            *end,
            data + size.div_ceil(512) * 512,
            "{archive}: end of {wname}"
        );
        assert_eq!(
            name.trim_end_matches('/'),
            wname,
            "{archive}: name at {off}"
        );
    }
    // The extraction tree lists the same members with the same names.
    let t = session.tree();
    let kids: Vec<String> = t.exts[0]
        .children
        .iter()
        .map(|&c| t.exts[c].display_name().trim_end_matches('/').to_string())
        .collect();
    let names: Vec<&String> = want.iter().map(|w| &w.3).collect();
    assert_eq!(
        kids.iter().collect::<Vec<_>>(),
        names,
        "{archive}: extraction names"
    );
    drop(t);

    // Cut anywhere: every member whose header is whole is listed once, at
    // its offset, grouped or not.
    for cut in (0..tar.len()).step_by(tar.len() / 37).skip(1) {
        let session = parse("many.tar", tar[..cut].to_vec());
        let (got, _) = entries(&session, 0);
        let whole: Vec<_> = want.iter().filter(|w| w.1 <= cut as u64).collect();
        assert_eq!(
            got.len(),
            whole.len(),
            "{archive} cut at {cut}: member count"
        );
        for ((start, _, name), w) in got.iter().zip(&whole) {
            assert_eq!((*start, name.trim_end_matches('/')), (w.0, w.3.as_str()));
        }
    }
}

/// Entries of 96 KiB: a run reaches the 16 MiB a group may span after 169
/// of them, and is one group; the last 131 stay entry by entry. (Such runs
/// were all entry by entry: a tar of 25 KiB files held a node for every
/// fourth member.)
#[test]
fn a_run_of_entries_cut_by_its_span_is_one_group() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("mid.tar");
    let script = format!(
        "import io, tarfile\n\
         with tarfile.open({p:?}, 'w', format=tarfile.GNU_FORMAT) as t:\n    \
             for i in range(300):\n        \
                 info = tarfile.TarInfo(f'd/f{{i:03}}.bin')\n        \
                 info.size = 96 * 1024\n        \
                 t.addfile(info, io.BytesIO(bytes([i % 251]) * info.size))\n\
         with tarfile.open({p:?}) as t:\n    \
             for m in t.getmembers():\n        \
                 print(m.offset, m.offset_data, m.size, m.name)\n",
        p = path.display().to_string()
    );
    let list = String::from_utf8(crate::util::python(&script)).unwrap();
    let want: Vec<(u64, u64, u64, String)> = list
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(4, ' ').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].to_string(),
            )
        })
        .collect();
    assert_eq!(want.len(), 300);
    let session = parse("mid.tar", std::fs::read(&path).unwrap());
    let (got, groups) = entries(&session, 0);
    assert_eq!(groups, 1);
    assert_eq!(
        session.tree().exts[0]
            .nodes
            .iter()
            .filter(|n| n.kind == "entry")
            .count(),
        131
    );
    assert_eq!(got.len(), want.len());
    for ((start, end, name), (off, data, size, wname)) in got.iter().zip(&want) {
        assert_eq!(
            (*start, *end, name.as_str()),
            (*off, data + size.div_ceil(512) * 512, wname.as_str())
        );
    }
}

#[test]
fn groups_of_entries_open_to_what_tarfile_lists_gnu() {
    check("many-gnu.tar.gz", "many-gnu.list");
}

#[test]
fn groups_of_entries_open_to_what_tarfile_lists_pax() {
    check("many-pax.tar.gz", "many-pax.list");
}

/// A gzip file inside a tar: its decoded stream is named as gunzip names
/// its output, after the member's last path component.
#[test]
fn a_gzip_member_decodes_to_its_own_base_name() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tar-gz-name");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("bundle/bash")).unwrap();
    let text = b"bash (5.2) unstable; urgency=medium\n".repeat(40);
    let gz = std::process::Command::new("gzip")
        .args(["-n", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(&text)?;
            c.wait_with_output()
        })
        .expect("gzip runs");
    std::fs::write(dir.join("bundle/bash/changelog.gz"), gz.stdout).unwrap();
    let tar = dir.join("doc.tar");
    let ok = std::process::Command::new("tar")
        .arg("-cf")
        .arg(&tar)
        .arg("-C")
        .arg(&dir)
        .arg("bundle")
        .status()
        .expect("GNU tar runs");
    assert!(ok.success());
    let session = parse("doc.tar", std::fs::read(&tar).unwrap());
    let t = session.tree();
    let id = (0..t.exts.len())
        .find(|&i| t.path_of(i).ends_with("changelog.gz"))
        .expect("the member");
    let stream = t.exts[id].children[0];
    assert_eq!(t.exts[stream].name.display(), "changelog");
    assert_eq!(crate::util::read_all(&t, stream), text);
}
