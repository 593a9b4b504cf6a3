//! Remote sources: FILE as an `http://` URL served by a small range-capable
//! server started here on loopback, and as an `s3://` URL served by moto's
//! S3 server (skipped, with a message, when moto is not installed). Every
//! command's output is compared with the same command on the local file.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pparse::data::{RemoteSource, Source};

use crate::util::{fixture, fixture_path, io_decoded, leaves, pparse, pparse_env};

/// How the test server answers a range request that does not start at 0
/// (the first request, which learns the size, is always answered well).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Good,
    /// 200 and the whole object, as a server without range support.
    IgnoreRange,
    /// A Content-Range one byte off from what was asked.
    ShiftRange,
    /// A well-formed 206 with half the bytes asked for.
    ShortRange,
    /// The full Content-Length announced, half the body sent, then closed.
    CutBody,
    /// The first answer says the object is 10 GiB; later ranges inside
    /// that size are answered 416 with the real size.
    Says10GiBThen416,
    /// Headers of a good 206, then nothing.
    StallAfterHeaders,
    /// Headers of a good 206, then a byte every 100 ms.
    Trickle,
    /// 200 and the whole object to every request, the first included.
    AlwaysWhole,
    /// As S3 answers: HEAD with an ETag and a date; every GET a 500.
    S3Get500,
    /// As S3 answers: HEAD with an ETag and a date; a GET is never answered.
    S3GetStall,
}

/// The size the first answer of [`Mode::Says10GiBThen416`] announces.
const TEN_GIB: u64 = 10 << 30;

/// A small HTTP/1.1 server on 127.0.0.1: HEAD and GET, `Range: bytes=a-b`
/// answered with 206 (keep-alive), counting requests and body bytes.
struct Server {
    port: u16,
    requests: Arc<AtomicU64>,
    served: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Server {
    fn start(files: HashMap<String, Arc<Vec<u8>>>, mode: Mode) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("local address").port();
        let requests = Arc::new(AtomicU64::new(0));
        let served = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let files = Arc::new(files);
        let (r, s, st) = (requests.clone(), served.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::Acquire) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (files, r, s) = (files.clone(), r.clone(), s.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, &files, mode, &r, &s);
                });
            }
        });
        Server {
            port,
            requests,
            served,
            stop,
        }
    }

    fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Answers the requests of one connection until the client closes it.
fn serve(
    conn: TcpStream,
    files: &HashMap<String, Arc<Vec<u8>>>,
    mode: Mode,
    requests: &AtomicU64,
    served: &AtomicU64,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        let mut range = None;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("range")
            {
                range = Some(v.trim().to_string());
            }
        }
        requests.fetch_add(1, Ordering::Relaxed);
        let path = target
            .split('?')
            .next()
            .unwrap_or("")
            .trim_start_matches('/');
        let Some(body) = files.get(path) else {
            out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            continue;
        };
        let total = body.len() as u64;
        let asked = range.as_deref().and_then(|r| {
            let (a, b) = r.strip_prefix("bytes=")?.split_once('-')?;
            let a: u64 = a.parse().ok()?;
            let b: u64 = if b.is_empty() {
                total.saturating_sub(1)
            } else {
                b.parse().ok()?
            };
            Some((a, b.min(total.saturating_sub(1))))
        });
        let head = method == "HEAD";
        if matches!(mode, Mode::S3Get500 | Mode::S3GetStall) {
            if head {
                let text = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {total}\r\nETag: \"0123abcd\"\r\n\
                     Last-Modified: Tue, 15 Nov 1994 08:12:31 GMT\r\n\r\n"
                );
                out.write_all(text.as_bytes())?;
            } else if mode == Mode::S3Get500 {
                let body = "<Error><Code>InternalError</Code></Error>";
                let text = format!(
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                out.write_all(text.as_bytes())?;
            } else {
                stall();
                return Ok(());
            }
            out.flush()?;
            continue;
        }
        let mut send = |status: &str, headers: String, bytes: &[u8], announced: usize| {
            let text = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {announced}\r\nAccept-Ranges: bytes\r\n{headers}\r\n"
            );
            out.write_all(text.as_bytes())?;
            if !head {
                out.write_all(bytes)?;
                served.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            out.flush()
        };
        match asked {
            None => send("200 OK", String::new(), body, body.len())?,
            Some(_) if mode == Mode::AlwaysWhole => {
                send("200 OK", String::new(), body, body.len())?;
            }
            Some((0, b)) if mode == Mode::Says10GiBThen416 => send(
                "206 Partial Content",
                format!("Content-Range: bytes 0-{b}/{TEN_GIB}\r\n"),
                &body[..=b as usize],
                b as usize + 1,
            )?,
            Some(_) if mode == Mode::Says10GiBThen416 => send(
                "416 Range Not Satisfiable",
                format!("Content-Range: bytes */{total}\r\n"),
                &[],
                0,
            )?,
            Some((a, _)) if a >= total => send(
                "416 Range Not Satisfiable",
                format!("Content-Range: bytes */{total}\r\n"),
                &[],
                0,
            )?,
            Some((a, b)) => {
                let part = &body[a as usize..=b as usize];
                let mode = if a == 0 { Mode::Good } else { mode };
                match mode {
                    Mode::Good => send(
                        "206 Partial Content",
                        format!("Content-Range: bytes {a}-{b}/{total}\r\n"),
                        part,
                        part.len(),
                    )?,
                    Mode::IgnoreRange => send("200 OK", String::new(), body, body.len())?,
                    Mode::ShiftRange => send(
                        "206 Partial Content",
                        format!("Content-Range: bytes {}-{}/{total}\r\n", a + 1, b),
                        &part[1..],
                        part.len() - 1,
                    )?,
                    Mode::ShortRange => {
                        let half = &part[..part.len() / 2];
                        let end = a + half.len() as u64 - 1;
                        send(
                            "206 Partial Content",
                            format!("Content-Range: bytes {a}-{end}/{total}\r\n"),
                            half,
                            half.len(),
                        )?;
                    }
                    Mode::CutBody => {
                        send(
                            "206 Partial Content",
                            format!("Content-Range: bytes {a}-{b}/{total}\r\n"),
                            &part[..part.len() / 2],
                            part.len(),
                        )?;
                        return Ok(());
                    }
                    Mode::StallAfterHeaders | Mode::Trickle => {
                        send(
                            "206 Partial Content",
                            format!("Content-Range: bytes {a}-{b}/{total}\r\n"),
                            &[],
                            part.len(),
                        )?;
                        if mode == Mode::StallAfterHeaders {
                            stall();
                            return Ok(());
                        }
                        // Until the client hangs up.
                        for byte in part {
                            std::thread::sleep(Duration::from_millis(100));
                            out.write_all(&[*byte])?;
                            out.flush()?;
                        }
                    }
                    Mode::Says10GiBThen416
                    | Mode::AlwaysWhole
                    | Mode::S3Get500
                    | Mode::S3GetStall => unreachable!("answered above"),
                }
            }
        }
    }
}

/// Keeps a connection open and silent for longer than any test waits
/// (the process ends before it does).
fn stall() {
    std::thread::sleep(Duration::from_secs(120));
}

fn one_file(name: &str, bytes: Vec<u8>) -> HashMap<String, Arc<Vec<u8>>> {
    HashMap::from([(name.to_string(), Arc::new(bytes))])
}

/// Pseudo-random bytes (xorshift), the same on every run.
fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn tree_cat_and_extract_over_http_match_the_local_file() {
    let server = Server::start(
        one_file("nested.tar.gz", fixture("nested.tar.gz")),
        Mode::Good,
    );
    let url = server.url("nested.tar.gz");
    let local = fixture_path("nested.tar.gz");

    for args in [&["tree"][..], &["tree", "--json"], &["nodes"]] {
        let want = pparse(args.iter().copied().chain([local.to_str().unwrap()]));
        let got = pparse(args.iter().copied().chain([url.as_str()]));
        assert_eq!(want.code, 0, "local {args:?}: {}", want.stderr_text());
        assert_eq!(got.code, 0, "{args:?} {url}: {}", got.stderr_text());
        assert_eq!(got.stdout_text(), want.stdout_text(), "{args:?} over http");
    }

    for leaf in leaves("nested.tar.gz") {
        let want = pparse(["cat", local.to_str().unwrap(), &leaf.path]);
        let got = pparse(["cat", &url, &leaf.path]);
        assert_eq!(
            got.code,
            want.code,
            "cat {}: {}",
            leaf.path,
            got.stderr_text()
        );
        assert!(
            got.stdout == want.stdout,
            "cat {} over http differs from the local file",
            leaf.path
        );
    }

    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b) = (dir.path().join("local"), dir.path().join("remote"));
    let want = pparse([
        "extract",
        local.to_str().unwrap(),
        "--out",
        a.to_str().unwrap(),
    ]);
    let got = pparse(["extract", &url, "--out", b.to_str().unwrap()]);
    assert_eq!(got.code, want.code, "extract: {}", got.stderr_text());
    assert_eq!(listing(&b), listing(&a), "extract over http");
}

#[test]
fn a_multi_megabyte_tar_gz_over_http_is_fetched_once() {
    use crate::bounds::{blocks, tar_header};
    use std::io::Write as _;
    let mut tar = Vec::new();
    for i in 0..5 {
        let data = noise((1 << 20) + i * 1000);
        tar.extend(tar_header(
            &format!("dir/part{i}.bin"),
            b'0',
            data.len() as u64,
        ));
        tar.extend(blocks(&data));
    }
    tar.resize(tar.len() + 1024, 0);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).expect("gzip");
    let gz = gz.finish().expect("gzip");
    let size = gz.len() as u64;
    let dir = tempfile::tempdir().expect("temp dir");
    let local = dir.path().join("parts.tar.gz");
    std::fs::write(&local, &gz).expect("write the local copy");
    let server = Server::start(one_file("parts.tar.gz", gz), Mode::Good);
    let url = server.url("parts.tar.gz");

    let want = pparse(["tree", local.to_str().unwrap()]);
    let got = pparse(["tree", &url]);
    assert_eq!(got.code, 0, "{url}: {}", got.stderr_text());
    assert_eq!(got.stdout_text(), want.stdout_text());
    // One pass, and the cache's budget holds the whole object: no byte is
    // fetched twice.
    assert!(
        server.served() <= size,
        "served {} bytes of a {size}-byte object",
        server.served()
    );
    let want = pparse(["cat", local.to_str().unwrap(), "parts.tar/dir/part3.bin"]);
    let got = pparse(["cat", &url, "parts.tar/dir/part3.bin"]);
    assert_eq!(got.code, 0, "cat: {}", got.stderr_text());
    assert!(
        !got.stdout.is_empty() && got.stdout == want.stdout,
        "cat over http"
    );
}

#[test]
fn an_index_of_a_remote_object_is_kept_in_a_folder_or_read_from_a_url() {
    let gz = fixture("nested.tar.gz");
    let server = Server::start(one_file("nested.tar.gz", gz.clone()), Mode::Good);
    let url = server.url("nested.tar.gz");
    let local = fixture_path("nested.tar.gz");
    let want = pparse(["tree", "--no-index", local.to_str().unwrap()]);
    let dir = tempfile::tempdir().expect("temp dir");
    let folder = format!("{}/", dir.path().display());
    let tree = |index: &str, url: &str| pparse(["tree", "--io-stats", "--index", index, url]);

    let first = tree(&folder, &url);
    assert_eq!(first.code, 0, "{}", first.stderr_text());
    assert_eq!(first.stdout_text(), want.stdout_text());
    assert!(io_decoded(&first) > 0);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let before = server.served();
    let second = tree(&folder, &url);
    assert_eq!(second.stdout_text(), want.stdout_text());
    assert_eq!(io_decoded(&second), 0, "{}", second.stderr_text());
    // The size, the hash of the ends (one block here) and nothing else.
    assert!(
        server.served() - before <= 256 << 10,
        "served {} bytes through an index",
        server.served() - before
    );

    // The same index served over HTTP beside the data: read, never written.
    let index = std::fs::read(dir.path().join(&names[0])).unwrap();
    let mut files = one_file("nested.tar.gz", gz);
    files.insert(format!("indexes/{}", names[0]), Arc::new(index));
    let both = Server::start(files, Mode::Good);
    let url = both.url("nested.tar.gz");
    let third = tree(&both.url("indexes/"), &url);
    assert_eq!(third.code, 0, "{}", third.stderr_text());
    assert_eq!(third.stdout_text(), want.stdout_text());
    assert_eq!(io_decoded(&third), 0, "{}", third.stderr_text());
    assert!(
        !third.stderr_text().contains("note:"),
        "{}",
        third.stderr_text()
    );
    // No index at that URL: the parse runs, and says it cannot write one.
    let fourth = tree(&both.url("elsewhere/"), &url);
    assert_eq!(fourth.code, 0, "{}", fourth.stderr_text());
    assert_eq!(fourth.stdout_text(), want.stdout_text());
    assert!(
        fourth
            .stderr_text()
            .contains("only s3:// objects are written"),
        "{}",
        fourth.stderr_text()
    );
}

/// Every file below `dir`, relative path and bytes.
fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// A safetensors file of about 90 MB: a JSON header naming four tensors,
/// then their (zero) data.
fn big_safetensors() -> Vec<u8> {
    let tensors: [(&str, &str, &[u64], u64); 4] = [
        ("model.embed.weight", "F32", &[4096, 4096], 4),
        ("model.layers.0.mlp.weight", "F16", &[4096, 2560], 2),
        ("model.layers.0.norm.bias", "BF16", &[4096], 2),
        ("lm_head.weight", "F32", &[512, 1024], 4),
    ];
    let mut header = String::from(r#"{"__metadata__":{"format":"pt"}"#);
    let mut at = 0u64;
    for (name, dtype, shape, width) in tensors {
        let len = shape.iter().product::<u64>() * width;
        let shape: Vec<String> = shape.iter().map(u64::to_string).collect();
        header.push_str(&format!(
            r#","{name}":{{"dtype":"{dtype}","shape":[{}],"data_offsets":[{at},{}]}}"#,
            shape.join(","),
            at + len
        ));
        at += len;
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut out = Vec::with_capacity(8 + header.len() + at as usize);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + at as usize, 0);
    out
}

#[test]
fn tensors_of_a_90_mb_safetensors_over_http_fetch_under_1_mb() {
    let bytes = big_safetensors();
    assert!(bytes.len() > 85_000_000, "{} bytes", bytes.len());
    let dir = tempfile::tempdir().expect("temp dir");
    let local = dir.path().join("model.safetensors");
    std::fs::write(&local, &bytes).expect("write the local copy");
    let server = Server::start(one_file("model.safetensors", bytes), Mode::Good);
    let url = server.url("model.safetensors");

    let want = pparse(["tensors", local.to_str().unwrap()]);
    assert_eq!(want.code, 0, "local: {}", want.stderr_text());
    assert!(want.stdout_text().contains("model.layers.0.mlp.weight"));
    let got = pparse(["tensors", &url]);
    assert_eq!(got.code, 0, "{url}: {}", got.stderr_text());
    assert_eq!(got.stdout_text(), want.stdout_text());
    let (served, requests) = (server.served(), server.requests());
    eprintln!("tensors of a 90 MB safetensors over http: {served} bytes in {requests} requests");
    assert!(
        served < 1_000_000,
        "listing the tensors fetched {served} bytes in {requests} requests"
    );
    // --io-stats reports what the server saw.
    let (before_served, before_requests) = (server.served(), server.requests());
    let run = pparse(["tensors", &url, "--json", "--io-stats"]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let err = run.stderr_text();
    let io: serde_json::Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    assert_eq!(
        io["io"]["remote_fetched"].as_u64(),
        Some(server.served() - before_served),
        "{err}"
    );
    assert_eq!(
        io["io"]["remote_requests"].as_u64(),
        Some(server.requests() - before_requests),
        "{err}"
    );
}

#[test]
fn many_threads_read_one_remote_source() {
    let bytes = noise(3 << 20);
    let server = Server::start(one_file("noise.bin", bytes.clone()), Mode::Good);
    let src = Arc::new(RemoteSource::open(&server.url("noise.bin")).expect("open"));
    assert_eq!(src.available(), bytes.len() as u64);
    assert_eq!(src.name(), b"noise.bin");
    let bytes = Arc::new(bytes);
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let (src, bytes) = (src.clone(), bytes.clone());
            std::thread::spawn(move || {
                let mut x = t * 7919 + 1;
                for i in 0..60u64 {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let len = [1usize, 4096, 300_000, 1 << 20][(i % 4) as usize];
                    let at = (x >> 11) % (bytes.len() as u64 + 10);
                    let mut buf = vec![0u8; len];
                    let n = src.read_at(at, &mut buf).expect("read_at");
                    let start = (at as usize).min(bytes.len());
                    let want = &bytes[start..(start + len).min(bytes.len())];
                    assert_eq!(n, want.len(), "read of {len} at {at}");
                    assert!(buf[..n] == *want, "bytes of a read of {len} at {at}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("reader thread");
    }
    let stats = src.stats();
    assert_eq!(stats.requests, server.requests());
    assert_eq!(stats.bytes_fetched, server.served());
    assert!(stats.bytes_fetched > 0);
}

#[test]
fn a_misbehaving_server_gives_an_error_never_wrong_bytes() {
    let bytes = noise(1 << 20);
    for mode in [
        Mode::IgnoreRange,
        Mode::ShiftRange,
        Mode::ShortRange,
        Mode::CutBody,
    ] {
        let server = Server::start(one_file("noise.bin", bytes.clone()), mode);
        let url = server.url("noise.bin");
        let src = RemoteSource::open(&url).expect("the first request is answered well");
        let mut buf = vec![0u8; 4096];
        let err = src
            .read_at(600_000, &mut buf)
            .expect_err(&format!("{mode:?}: a read past the first block fails"));
        assert!(err.to_string().contains(&url), "{mode:?}: {err}");
        // The CLI says so and exits 2; what it wrote is the object's start.
        let run = pparse(["cat", &url, ""]);
        assert_eq!(run.code, 2, "{mode:?}: {}", run.stderr_text());
        assert!(
            run.stderr_text().contains(&url),
            "{mode:?}: {}",
            run.stderr_text()
        );
        assert!(
            bytes.starts_with(&run.stdout),
            "{mode:?}: wrong bytes on stdout"
        );
    }
}

#[test]
fn a_missing_object_exits_2_naming_the_url() {
    let server = Server::start(HashMap::new(), Mode::Good);
    let url = server.url("missing.tar.gz");
    for cmd in ["tree", "tensors"] {
        let run = pparse([cmd, &url]);
        assert_eq!(run.code, 2, "{cmd}: {}", run.stderr_text());
        let err = run.stderr_text();
        assert!(err.contains(&url) && err.contains("404"), "{cmd}: {err}");
    }
}

// ---------------------------------------------------------------------------
// S3, served by moto
// ---------------------------------------------------------------------------

/// A moto S3 server, killed when dropped.
struct Moto {
    child: Child,
    port: u16,
    log: tempfile::NamedTempFile,
}

impl Drop for Moto {
    fn drop(&mut self) {
        // moto does not always end on SIGTERM.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Starts moto on a free loopback port; `None` (with the reason
    /// printed) when python3 or moto is missing.
    fn start() -> Option<Moto> {
        let probe = Command::new("python3")
            .args(["-c", "import moto.server, boto3"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        match probe {
            Err(e) => {
                skipped(&format!("no python3 ({e})"));
                return None;
            }
            Ok(o) if !o.status.success() => {
                let why = String::from_utf8_lossy(&o.stderr);
                let why = why.trim().lines().last().unwrap_or("").to_string();
                skipped(&format!("moto's server cannot be imported ({why})"));
                return None;
            }
            Ok(_) => {}
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let log = tempfile::NamedTempFile::new().expect("log file");
        let child = Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(log.reopen().expect("log"))
            .stderr(log.reopen().expect("log"))
            .spawn()
            .expect("start moto");
        let mut moto = Moto { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(moto);
            }
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!(
                    "moto exited ({status}) before serving:\n{}",
                    moto.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "moto did not listen on port {port} within 60 s:\n{}",
                moto.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log_text(&self) -> String {
        let mut s = String::new();
        let _ = std::fs::File::open(self.log.path()).and_then(|mut f| f.read_to_string(&mut s));
        s
    }
}

/// Says why the S3 test is skipped, on the real stderr: the harness
/// captures `eprintln!` of a passing test, and a skip must not pass
/// silently.
fn skipped(why: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED remote::tree_over_s3_matches_the_local_file: {why}; \
         `python3 -m pip install 'moto[server]'` to run it"
    );
}

#[test]
fn tree_over_s3_matches_the_local_file() {
    let Some(moto) = Moto::start() else { return };
    let endpoint = moto.endpoint();
    let env = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
    ];
    let local = fixture_path("nested.tar.gz");
    let upload = format!(
        "import boto3\n\
         s3 = boto3.client('s3', endpoint_url='{endpoint}', aws_access_key_id='test', \
         aws_secret_access_key='test', region_name='us-east-1')\n\
         s3.create_bucket(Bucket='pparse-test')\n\
         s3.upload_file({:?}, 'pparse-test', 'data/nested.tar.gz')\n",
        local.to_str().unwrap()
    );
    let up = Command::new("python3")
        .args(["-c", &upload])
        .output()
        .expect("run python3");
    assert!(
        up.status.success(),
        "upload to moto: {}\n{}",
        String::from_utf8_lossy(&up.stderr),
        moto.log_text()
    );

    let want = pparse(["tree", local.to_str().unwrap()]);
    let got = pparse_env(["tree", "s3://pparse-test/data/nested.tar.gz"], &env);
    assert_eq!(got.code, 0, "tree over s3: {}", got.stderr_text());
    assert_eq!(got.stdout_text(), want.stdout_text(), "tree over s3");

    let leaf = &leaves("nested.tar.gz")[0];
    let want = pparse(["cat", local.to_str().unwrap(), &leaf.path]);
    let got = pparse_env(
        ["cat", "s3://pparse-test/data/nested.tar.gz", &leaf.path],
        &env,
    );
    assert_eq!(got.code, 0, "cat over s3: {}", got.stderr_text());
    assert!(got.stdout == want.stdout, "cat {} over s3", leaf.path);

    // An index shared beside the data: the first run writes it, one
    // object under the prefix; the next runs start from it.
    let url = "s3://pparse-test/data/nested.tar.gz";
    let prefix = "s3://pparse-test/indexes/";
    let want = pparse(["tree", "--no-index", local.to_str().unwrap()]);
    for run in 0..2 {
        let got = pparse_env(["tree", "--io-stats", "--index", prefix, url], &env);
        assert_eq!(got.code, 0, "run {run}: {}", got.stderr_text());
        assert_eq!(got.stdout_text(), want.stdout_text());
        assert!(
            !got.stderr_text().contains("note:"),
            "{}",
            got.stderr_text()
        );
        assert_eq!(
            io_decoded(&got) == 0,
            run == 1,
            "run {run}: {}",
            got.stderr_text()
        );
    }
    let list = format!(
        "import boto3\n\
         s3 = boto3.client('s3', endpoint_url='{endpoint}', aws_access_key_id='test', \
         aws_secret_access_key='test', region_name='us-east-1')\n\
         print([o['Key'] for o in s3.list_objects_v2(Bucket='pparse-test', Prefix='indexes/')['Contents']])\n"
    );
    let keys = Command::new("python3")
        .args(["-c", &list])
        .output()
        .expect("run python3");
    let keys = String::from_utf8_lossy(&keys.stdout);
    assert_eq!(keys.matches(".pidx").count(), 1, "{keys}");

    let missing = "s3://pparse-test/data/missing.tar.gz";
    let run = pparse_env(["tree", missing], &env);
    assert_eq!(run.code, 2, "{}", run.stderr_text());
    assert!(run.stderr_text().contains(missing), "{}", run.stderr_text());
}

// ---------------------------------------------------------------------------
// Hostile servers: each ends the command in seconds, exit 2, naming the
// URL, the offset and the reason, after a bounded number of requests
// ---------------------------------------------------------------------------

/// Short deadlines, so that a server that never finishes fails fast.
const SHORT: [(&str, &str); 3] = [
    ("PPARSE_REMOTE_TIMEOUT", "0.5"),
    ("PPARSE_REMOTE_DEADLINE", "2"),
    ("PPARSE_PROGRESS", "0"),
];

/// A tar whose second header is past the first 256 KiB block, so that
/// listing it reads beyond the first request's bytes.
fn big_member_tar() -> Vec<u8> {
    use crate::bounds::{blocks, tar_header};
    let data = noise(300_000);
    let mut tar = tar_header("big.bin", b'0', data.len() as u64);
    tar.extend(blocks(&data));
    let small = b"hello\n";
    tar.extend(tar_header("small.txt", b'0', small.len() as u64));
    tar.extend(blocks(small));
    tar.resize(tar.len() + 1024, 0);
    tar
}

/// Runs `args` with the short deadlines and checks the hostile server's
/// effect: exit 2 within `secs`, stderr naming the URL, an offset and each
/// of `reasons`, at most `max_requests` requests.
fn fails_fast(server: &Server, url: &str, args: &[&str], reasons: &[&str], max_requests: u64) {
    let start = Instant::now();
    let run = pparse_env(args.iter().copied(), &SHORT);
    let took = start.elapsed();
    let err = run.stderr_text();
    eprintln!(
        "{args:?}: exit {} in {took:?} after {} requests:\n{err}",
        run.code,
        server.requests()
    );
    assert_eq!(run.code, 2, "{args:?}: exit {}: {err}", run.code);
    assert!(took < Duration::from_secs(15), "{args:?} took {took:?}");
    assert!(err.contains(url), "{args:?}: no URL in: {err}");
    assert!(err.contains("offset"), "{args:?}: no offset in: {err}");
    for r in reasons {
        assert!(err.contains(r), "{args:?}: no {r:?} in: {err}");
    }
    assert!(
        server.requests() <= max_requests,
        "{args:?}: {} requests",
        server.requests()
    );
    assert!(
        run.stdout_text().contains("CORRUPT"),
        "{}",
        run.stdout_text()
    );
}

#[test]
fn a_server_that_says_10_gib_then_answers_416_is_an_error_not_a_loop() {
    let server = Server::start(
        one_file("big.tar", big_member_tar()),
        Mode::Says10GiBThen416,
    );
    let url = server.url("big.tar");
    fails_fast(
        &server,
        &url,
        &["tree", &url],
        &["416", "10737418240 bytes it announced"],
        4,
    );
}

#[test]
fn a_server_that_stalls_after_its_headers_fails_within_the_deadline() {
    let server = Server::start(
        one_file("big.tar", big_member_tar()),
        Mode::StallAfterHeaders,
    );
    let url = server.url("big.tar");
    fails_fast(&server, &url, &["tree", &url], &["within"], 5);
}

#[test]
fn a_server_that_trickles_fails_within_the_deadline() {
    let server = Server::start(one_file("big.tar", big_member_tar()), Mode::Trickle);
    let url = server.url("big.tar");
    fails_fast(&server, &url, &["tree", &url], &["within"], 5);
}

#[test]
fn a_server_that_answers_200_to_the_first_range_is_refused() {
    let server = Server::start(one_file("big.tar", big_member_tar()), Mode::AlwaysWhole);
    let url = server.url("big.tar");
    let run = pparse_env(["tree", &url], &SHORT);
    let err = run.stderr_text();
    assert_eq!(run.code, 2, "{err}");
    assert!(err.contains(&url) && err.contains("byte ranges"), "{err}");
    assert!(server.requests() <= 1, "{} requests", server.requests());
}

/// An S3 object at `bucket/key` of the hostile server, and the
/// environment that points the S3 client at it.
fn s3_env(server: &Server) -> Vec<(&'static str, String)> {
    let mut env: Vec<(&str, String)> = SHORT.iter().map(|(k, v)| (*k, v.to_string())).collect();
    env.extend([
        (
            "AWS_ENDPOINT_URL",
            format!("http://127.0.0.1:{}", server.port),
        ),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
    ]);
    env
}

#[test]
fn an_s3_object_whose_get_fails_or_never_answers_is_an_error() {
    for (mode, reason) in [(Mode::S3Get500, "500"), (Mode::S3GetStall, "within")] {
        let server = Server::start(one_file("bucket/data/big.tar", big_member_tar()), mode);
        let env = s3_env(&server);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let url = "s3://bucket/data/big.tar";
        let start = Instant::now();
        let run = pparse_env(["tree", url], &env);
        let took = start.elapsed();
        let err = run.stderr_text();
        assert_eq!(run.code, 2, "{mode:?}: {err}");
        assert!(took < Duration::from_secs(15), "{mode:?} took {took:?}");
        assert!(
            err.contains(url) && err.contains("offset 0") && err.contains(reason),
            "{mode:?}: {err}"
        );
        assert!(
            run.stdout_text().contains("CORRUPT"),
            "{mode:?}: {}",
            run.stdout_text()
        );
        assert!(
            server.requests() <= 8,
            "{mode:?}: {} requests",
            server.requests()
        );
    }
}
