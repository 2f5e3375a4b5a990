//! Headless Chromium driven over the DevTools protocol through a pipe (`--remote-debugging-pipe`:
//! JSON messages separated by NUL bytes, commands on fd 3, replies and events on fd 4), so that
//! tests can click, type, wait for scripts and take screenshots without a WebSocket library.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A browser with one page attached.
pub struct Browser {
    child: Child,
    to_browser: File,
    from_browser: Receiver<Value>,
    next_id: u64,
    session: String,
    _profile: tempfile::TempDir,
}

fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    // SAFETY: a valid array of two fds to fill.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0, "pipe2");
    // Above 10, so that moving them to 3 and 4 in the child cannot overwrite one with the other.
    // SAFETY: duplicating fds we own.
    let high = |fd: RawFd| unsafe {
        let h = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
        libc::close(fd);
        h
    };
    (high(fds[0]), high(fds[1]))
}

impl Browser {
    /// Starts `chrome` headless with a fresh profile and a `w` x `h` viewport.
    pub fn launch(chrome: &Path, w: u32, h: u32) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (cmd_r, cmd_w) = pipe();
        let (ev_r, ev_w) = pipe();
        let mut c = Command::new(chrome);
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={w},{h}"))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: only dup2 (async-signal-safe) between fork and exec; dup2 clears close-on-exec.
        unsafe {
            c.pre_exec(move || {
                if libc::dup2(cmd_r, 3) < 0 || libc::dup2(ev_w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = c.spawn().expect("chromium starts");
        // SAFETY: closing the child's ends in the parent, taking ownership of ours.
        let (to_browser, from) = unsafe {
            libc::close(cmd_r);
            libc::close(ev_w);
            (File::from_raw_fd(cmd_w), File::from_raw_fd(ev_r))
        };
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(from);
            let mut buf = Vec::new();
            while r.read_until(0, &mut buf).map(|n| n > 0).unwrap_or(false) {
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
                buf.clear();
            }
        });
        let mut b =
            Browser { child, to_browser, from_browser: rx, next_id: 0, session: String::new(), _profile: profile };
        let targets = b.call(None, "Target.getTargets", json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .map(|t| t["targetId"].as_str().unwrap().to_string())
            .unwrap_or_else(|| {
                b.call(None, "Target.createTarget", json!({"url": "about:blank"}))["targetId"]
                    .as_str()
                    .unwrap()
                    .to_string()
            });
        let att = b.call(None, "Target.attachToTarget", json!({"targetId": page, "flatten": true}));
        b.session = att["sessionId"].as_str().expect("a session").to_string();
        b.cmd("Page.enable", json!({}));
        b.cmd(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": w, "height": h, "deviceScaleFactor": 1, "mobile": false}),
        );
        b
    }

    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.try_call(session, method, params).unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    /// A command; the protocol's error as `Err` (a page that is navigating away, ...).
    fn try_call(&mut self, session: Option<&str>, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to_browser.write_all(&bytes).expect("write to chromium");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let m =
                self.from_browser.recv_timeout(left).unwrap_or_else(|_| panic!("no reply to {method} from chromium"));
            if m["id"] == id {
                if let Some(e) = m.get("error") {
                    return Err(e.clone());
                }
                return Ok(m["result"].clone());
            }
        }
    }

    /// A command to the page.
    pub fn cmd(&mut self, method: &str, params: Value) -> Value {
        let s = self.session.clone();
        self.call(Some(&s), method, params)
    }

    /// Loads `url` (returns when the navigation is committed; wait for the page's own signal).
    pub fn goto(&mut self, url: &str) {
        let r = self.cmd("Page.navigate", json!({"url": url}));
        assert!(r.get("errorText").is_none(), "navigating to {url}: {r}");
    }

    /// Evaluates `expr` in the page (promises awaited) and returns its value.
    pub fn eval(&mut self, expr: &str) -> Value {
        let s = self.session.clone();
        let params = json!({"expression": expr, "returnByValue": true, "awaitPromise": true});
        // While a page is replaced by the next, there is no context to evaluate in: null.
        let Ok(r) = self.try_call(Some(&s), "Runtime.evaluate", params) else { return Value::Null };
        if let Some(e) = r.get("exceptionDetails") {
            return json!({"__exception": e.to_string()});
        }
        r["result"].get("value").cloned().unwrap_or(Value::Null)
    }

    /// Waits until `expr` is truthy (polling every 100 ms), returning its value; panics after `secs`.
    pub fn wait_for(&mut self, expr: &str, secs: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let v = self.eval(&format!("(() => {{ try {{ return {expr}; }} catch (e) {{ return null; }} }})()"));
            let truthy = match &v {
                Value::Null | Value::Bool(false) => false,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return v;
            }
            assert!(Instant::now() < deadline, "waited {secs} s for {expr}; page text:\n{}", self.text());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the page to say it has rendered (`<body data-ready="1">`, set by common.js).
    pub fn wait_ready(&mut self, secs: u64) {
        self.wait_for("document.readyState === 'complete' && document.body.dataset.ready === '1'", secs);
    }

    /// The page's visible text (for messages).
    pub fn text(&mut self) -> String {
        let v = self.eval("document.body ? document.body.innerText : ''");
        v.as_str().unwrap_or("").chars().take(3000).collect()
    }

    /// The centre of the element `selector`, scrolled into view, in viewport pixels.
    pub fn center(&mut self, selector: &str) -> (f64, f64) {
        let sel = serde_json::to_string(selector).unwrap();
        let v = self.eval(&format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return null; e.scrollIntoView({{block: 'center'}}); \
             const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()"
        ));
        let a = v.as_array().unwrap_or_else(|| panic!("no element {selector}"));
        (a[0].as_f64().unwrap(), a[1].as_f64().unwrap())
    }

    /// A left click at viewport coordinates (a real mouse event: press and release).
    pub fn click_at(&mut self, x: f64, y: f64) {
        self.cmd("Input.dispatchMouseEvent", json!({"type": "mouseMoved", "x": x, "y": y}));
        for t in ["mousePressed", "mouseReleased"] {
            self.cmd("Input.dispatchMouseEvent", json!({"type": t, "x": x, "y": y, "button": "left", "clickCount": 1}));
        }
    }

    /// Clicks the element `selector`.
    pub fn click(&mut self, selector: &str) {
        let (x, y) = self.center(selector);
        self.click_at(x, y);
    }

    /// Clicks into the field `selector`, selects what it holds and types `text` over it.
    pub fn type_into(&mut self, selector: &str, text: &str) {
        self.click(selector);
        let sel = serde_json::to_string(selector).unwrap();
        self.eval(&format!("document.querySelector({sel}).select()"));
        self.cmd("Input.insertText", json!({"text": text}));
    }

    /// Presses Enter (submits the focused form).
    pub fn enter(&mut self) {
        for t in ["keyDown", "keyUp"] {
            let mut p = json!({"type": t, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13});
            if t == "keyDown" {
                p["text"] = json!("\r");
            }
            self.cmd("Input.dispatchKeyEvent", p);
        }
    }

    /// A PNG of the whole page, written to `out` and returned.
    pub fn screenshot(&mut self, out: &Path) -> Vec<u8> {
        let r = self.cmd("Page.captureScreenshot", json!({"format": "png", "captureBeyondViewport": true}));
        let png = base64_decode(r["data"].as_str().expect("image data"));
        if let Some(d) = out.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(out, &png).unwrap();
        png
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.try_call(None, "Browser.close", json!({}));
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Standard base64 (RFC 4648) without line breaks, as DevTools sends images.
pub fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a') as u32 + 26,
            b'0'..=b'9' => (c - b'0') as u32 + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=' && !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk.iter().fold(0u32, |acc, &c| (acc << 6) | val(c)) << (6 * (4 - chunk.len()));
        let b = n.to_be_bytes();
        out.extend_from_slice(&b[1..chunk.len()]);
    }
    out
}
