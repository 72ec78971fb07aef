//! The inputs and the page format of the dynamic API (`web99.md` §6.1, §6.2, §6.5,
//! §6.6): the query string, the `my_cookie` cookie, the POST form, and the HTML
//! wrapper every dynamic answer is sent in.
//!
//! Every parser is strict and says why it refused, so the server can answer a
//! malformed request with a 400 and a one-line reason.

use std::borrow::Cow;

use crate::ads::{ADS, FIRST_USER_ID, ResetParams};
use crate::fileset::FileId;

/// The 23-byte trailer after the file in a dynamic answer (TUX's form).
pub const TRAILER: &[u8] = b"\n</pre>\n</body></html>\n";

/// What a query string asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// A file of the set: `[prefix]file_set/dirNNNNN/classC_F`. `path` is the
    /// file's path from the document root, without a leading `/`.
    File {
        /// The file.
        id: FileId,
        /// Where it lives beneath the document root.
        path: String,
    },
    /// `command/Reset&…`.
    Reset(ResetParams),
    /// `command/Fetch`.
    Fetch,
    /// `command/Finish` (a modified manager's; answered 200, does nothing).
    Finish,
}

/// Reads a query string.
pub fn parse_query(query: &[u8]) -> Result<Query, &'static str> {
    let q = std::str::from_utf8(query).map_err(|_| "query is not UTF-8")?;
    if let Some(command) = q.strip_prefix("command/") {
        return parse_command(command);
    }
    parse_file(q).map(|(id, path)| Query::File { id, path })
}

/// `[prefix/]file_set/dirNNNNN/classC_F`: the prefix may only hold plain path
/// segments, so the path can never leave the document root's file sets.
pub fn parse_file(q: &str) -> Result<(FileId, String), &'static str> {
    let q = q.trim_start_matches('/');
    let at = q
        .rfind("file_set/")
        .ok_or("no file_set path in the query")?;
    let (prefix, rest) = q.split_at(at);
    let clean_segment = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    if !prefix.is_empty() {
        let segments = prefix.strip_suffix('/').ok_or("bad path before file_set")?;
        if !segments.split('/').all(clean_segment) {
            return Err("bad path before file_set");
        }
    }
    let rest = rest
        .strip_prefix("file_set/dir")
        .ok_or("bad file_set path")?;
    let (dir, file) = rest.split_once("/class").ok_or("bad file_set path")?;
    let b = file.as_bytes();
    if dir.len() != 5 || !dir.bytes().all(|c| c.is_ascii_digit()) || b.len() != 3 || b[1] != b'_' {
        return Err("bad file_set path");
    }
    let (class, num) = (b[0].wrapping_sub(b'0'), b[2].wrapping_sub(b'0'));
    if class > 3 || num > 8 {
        return Err("class or file number out of range");
    }
    let id = FileId {
        dir: dir.parse().map_err(|_| "bad directory number")?,
        class,
        num,
    };
    Ok((id, format!("{prefix}{id}")))
}

fn parse_command(command: &str) -> Result<Query, &'static str> {
    let mut parts = command.split('&');
    match parts.next() {
        Some("Fetch") => Ok(Query::Fetch),
        Some("Finish") => Ok(Query::Finish),
        Some("Reset") => parse_reset(parts).map(Query::Reset),
        _ => Err("unknown command"),
    }
}

fn parse_reset<'a>(parts: impl Iterator<Item = &'a str>) -> Result<ResetParams, &'static str> {
    let (mut maxload, mut pttime, mut maxthread, mut expired) = (None, None, None, None);
    for part in parts {
        let (key, value) = part
            .split_once('=')
            .ok_or("Reset parameter without a value")?;
        let number = |v: &str| {
            v.parse::<u32>()
                .map_err(|_| "Reset parameter is not a number")
        };
        match key {
            "maxload" => maxload = Some(number(value)?),
            "pttime" => pttime = Some(number(value)?),
            "maxthread" => maxthread = Some(number(value)?),
            "exp" => {
                let (a, b) = value.split_once(',').ok_or("exp needs two ad ids")?;
                let (a, b) = (number(a)?, number(b)?);
                if a >= ADS || b >= ADS {
                    return Err("exp ad id out of range");
                }
                expired = Some([a, b]);
            }
            // The manager sends it for a feature that never came; ignored.
            "urlroot" => {}
            _ => return Err("unknown Reset parameter"),
        }
    }
    let params = ResetParams {
        maxload: maxload.ok_or("Reset without maxload")?,
        pttime: pttime.ok_or("Reset without pttime")?,
        maxthread: maxthread.ok_or("Reset without maxthread")?,
        expired: expired.ok_or("Reset without exp")?,
    };
    if params.maxload.max(params.maxthread) > MAX_USERS {
        return Err("maxload or maxthread too large");
    }
    Ok(params)
}

/// Most users a Reset may ask for: ten times the largest published result, and a
/// bound on the table a request can make the server build (1.5 MB of records).
pub const MAX_USERS: u32 = 100_000;

/// The `my_cookie` of a CAD GET or a POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookie {
    /// The user id (≥ 10000).
    pub user_id: u32,
    /// The last ad the user saw (0 to 359).
    pub last_ad: u32,
}

impl Cookie {
    /// Index of the user in `User.Personality`.
    pub fn user_index(self) -> u32 {
        self.user_id - FIRST_USER_ID
    }
}

/// Finds `my_cookie=user_id=U&last_ad=A` in a `Cookie` header (other cookies may
/// come before or after it). `Ok(None)` when there is no `my_cookie`.
pub fn parse_cookie(header: &[u8]) -> Result<Option<Cookie>, &'static str> {
    let text = std::str::from_utf8(header).map_err(|_| "cookie is not UTF-8")?;
    let Some(value) = text
        .split(';')
        .map(str::trim)
        .find_map(|pair| pair.strip_prefix("my_cookie="))
    else {
        return Ok(None);
    };
    let mut user_id = None;
    let mut last_ad = None;
    for field in value.split('&') {
        match field.split_once('=') {
            Some(("user_id", v)) => user_id = v.parse::<u32>().ok(),
            Some(("last_ad", v)) => last_ad = v.parse::<u32>().ok(),
            _ => return Err("malformed my_cookie"),
        }
    }
    let user_id = user_id
        .filter(|&u| u >= FIRST_USER_ID)
        .ok_or("bad user_id in my_cookie")?;
    let last_ad = last_ad
        .filter(|&a| a < ADS)
        .ok_or("bad last_ad in my_cookie")?;
    Ok(Some(Cookie { user_id, last_ad }))
}

/// The form of a POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Form {
    /// URL path of the file set's parent, with a trailing `/` (e.g. `/file_set/`).
    pub urlroot: String,
    /// The file the form names.
    pub id: FileId,
    /// Its path beneath the document root.
    pub path: String,
    /// The `client` field.
    pub client: u32,
}

/// Reads `urlroot=…&dir=…&class=…&num=…&client=…` in any order.
pub fn parse_form(body: &[u8]) -> Result<Form, &'static str> {
    let text = std::str::from_utf8(body).map_err(|_| "form is not UTF-8")?;
    let (mut urlroot, mut dir, mut class, mut num, mut client) = (None, None, None, None, None);
    for field in text.trim_end_matches(['\r', '\n']).split('&') {
        let (key, value) = field.split_once('=').ok_or("form field without a value")?;
        let slot = match key {
            "urlroot" => &mut urlroot,
            "dir" => &mut dir,
            "class" => &mut class,
            "num" => &mut num,
            "client" => &mut client,
            _ => return Err("unknown form field"),
        };
        if slot.replace(value).is_some() {
            return Err("repeated form field");
        }
    }
    let urlroot = urlroot.ok_or("form without urlroot")?;
    let (dir, class, num) = (
        dir.ok_or("form without dir")?,
        class.ok_or("form without class")?,
        num.ok_or("form without num")?,
    );
    let client = client
        .ok_or("form without client")?
        .parse()
        .map_err(|_| "client is not a number")?;
    if !urlroot.starts_with('/') || !urlroot.ends_with('/') {
        return Err("urlroot must start and end with /");
    }
    let (id, path) = parse_file(&format!("{urlroot}dir{dir}/class{class}_{num}"))?;
    Ok(Form {
        urlroot: urlroot.to_owned(),
        id,
        path,
        client,
    })
}

/// The HTML before the file in a dynamic answer; the file follows, then
/// [`TRAILER`].
///
/// Every value is HTML-escaped ([`html_escape`]): the query is the client's, and a
/// `<script>` after `command/Fetch&` or in a POST's query must come back as text,
/// not markup. The kit's own file queries hold none of the escaped characters, so
/// the pages it checks are the spec's byte for byte; a Reset's `&` separators come
/// back as `&amp;`, and of a Reset the kit reads only the status.
pub fn wrapper_head(server: &str, remote_addr: &str, script: &str, query: &str) -> String {
    let (server, remote_addr) = (html_escape(server), html_escape(remote_addr));
    let (script, query) = (html_escape(script), html_escape(query));
    format!(
        "<html>\n<head><title>SPECweb99 Dynamic GET & POST Test</title></head>\n<body>\n\
         <p>SERVER_SOFTWARE = {server}\n<p>REMOTE_ADDR = {remote_addr}\n\
         <p>SCRIPT_NAME = {script}\n<p>QUERY_STRING = {query}\n<pre>\n"
    )
}

/// `text` with `<`, `>`, `&`, `"` and `'` written as character references, so it
/// can stand in HTML text or a quoted attribute; borrowed when there is nothing to
/// escape, as for every query the benchmark sends.
pub fn html_escape(text: &str) -> Cow<'_, str> {
    let special = |c: char| matches!(c, '<' | '>' | '&' | '"' | '\'');
    if !text.contains(special) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;
