//! The report that collects every error and warning while the configuration is
//! read, and the readers of typed values from TOML tables and flags that add to
//! it. A reader that finds a wrong value reports it and leaves the setting as it
//! was, so reading goes on and one run names every mistake.

use std::time::Duration;

use toml::{Table, Value};

use super::units::{parse_duration, parse_size};

/// The known key `key` is most likely a misspelling of: close by edit distance
/// (at most a third of its length, and at most 3).
fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let limit = (key.chars().count() / 3).clamp(1, 3);
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(key, k), *k))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, k)| k)
}

/// Collects errors and warnings while reading.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(super) errors: Vec<String>,
    pub(super) warnings: Vec<String>,
}

impl Report {
    /// Every key of `table` that is not in `known` is an error, with the known key
    /// it most likely meant: a typo (`[smpt]`, `acces_log`) must not leave a
    /// server, a log or a site silently unconfigured (issue 56).
    pub(super) fn known_keys(&mut self, table: &Table, path: &str, known: &[&str]) {
        for key in table.keys().filter(|k| !known.contains(&k.as_str())) {
            let hint = closest(key, known)
                .map(|k| format!(" (did you mean {path}{k}?)"))
                .unwrap_or_default();
            self.errors.push(format!("{path}{key}: unknown key{hint}"));
        }
    }

    pub(super) fn table<'t>(&mut self, t: &'t Table, path: &str, key: &str) -> Option<&'t Table> {
        match t.get(key)? {
            Value::Table(inner) => Some(inner),
            other => {
                self.errors.push(format!(
                    "{path}{key}: expected a table, found {}",
                    other.type_str()
                ));
                None
            }
        }
    }

    pub(super) fn string(&mut self, t: &Table, path: &str, key: &str) -> Option<String> {
        match t.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.errors.push(format!(
                    "{path}{key}: expected a string, found {}",
                    other.type_str()
                ));
                None
            }
        }
    }

    /// A string that, when given, replaces `into`.
    pub(super) fn string_into(&mut self, t: &Table, path: &str, key: &str, into: &mut String) {
        if let Some(s) = self.string(t, path, key) {
            *into = s;
        }
    }

    pub(super) fn integer(&mut self, t: &Table, path: &str, key: &str) -> Option<usize> {
        match t.get(key)? {
            Value::Integer(n) if *n >= 0 => usize::try_from(*n).ok(),
            other => {
                self.errors.push(format!(
                    "{path}{key}: expected a non-negative integer, found {other}"
                ));
                None
            }
        }
    }

    pub(super) fn integer_into<T: TryFrom<usize>>(
        &mut self,
        t: &Table,
        path: &str,
        key: &str,
        into: &mut T,
    ) {
        if let Some(n) = self.integer(t, path, key) {
            match T::try_from(n) {
                Ok(v) => *into = v,
                Err(_) => self
                    .errors
                    .push(format!("{path}{key}: {n} is out of range")),
            }
        }
    }

    /// `true` or `false`; anything else is reported and `into` left as it is.
    pub(super) fn boolean_into(&mut self, t: &Table, path: &str, key: &str, into: &mut bool) {
        match t.get(key) {
            None => {}
            Some(Value::Boolean(b)) => *into = *b,
            Some(other) => self.errors.push(format!(
                "{path}{key}: expected true or false, found {other}"
            )),
        }
    }

    /// A value given as a string and parsed with `parse`.
    pub(super) fn parsed<T>(
        &mut self,
        t: &Table,
        path: &str,
        key: &str,
        parse: fn(&str) -> Result<T, String>,
        into: &mut T,
    ) {
        if let Some(text) = self.string(t, path, key) {
            match parse(&text) {
                Ok(v) => *into = v,
                Err(e) => self.errors.push(format!("{path}{key}: {e}")),
            }
        }
    }

    /// A duration: a string with a unit (`"20s"`, `"200ms"`) or whole seconds.
    pub(super) fn duration(&mut self, t: &Table, path: &str, key: &str, into: &mut Duration) {
        match t.get(key) {
            None => {}
            Some(Value::Integer(n)) if *n >= 0 => *into = Duration::from_secs(n.unsigned_abs()),
            Some(Value::String(s)) => match parse_duration(s) {
                Ok(d) => *into = d,
                Err(e) => self.errors.push(format!("{path}{key}: {e}")),
            },
            Some(other) => self.errors.push(format!(
                "{path}{key}: expected a duration like \"20s\" or \"200ms\", found {other}"
            )),
        }
    }

    /// A size: bytes as an integer, or a string with a unit (`"32KiB"`).
    pub(super) fn size<T: TryFrom<u64>>(&mut self, t: &Table, path: &str, key: &str, into: &mut T) {
        let bytes = match t.get(key) {
            None => return,
            Some(Value::Integer(n)) if *n >= 0 => Ok(n.unsigned_abs()),
            Some(Value::String(s)) => parse_size(s),
            Some(other) => Err(format!(
                "expected a size like 8192 or \"32KiB\", found {other}"
            )),
        };
        match bytes.and_then(|b| T::try_from(b).map_err(|_| format!("{b} is out of range"))) {
            Ok(v) => *into = v,
            Err(e) => self.errors.push(format!("{path}{key}: {e}")),
        }
    }

    pub(super) fn flag<T>(
        &mut self,
        name: &str,
        text: Option<&str>,
        parse: fn(&str) -> Result<T, String>,
        into: &mut T,
    ) {
        if let Some(text) = text {
            match parse(text) {
                Ok(v) => *into = v,
                Err(e) => self.errors.push(format!("{name} {text}: {e}")),
            }
        }
    }

    /// An array of strings (a single string is taken as a one-element array).
    pub(super) fn strings(&mut self, t: &Table, path: &str, key: &str) -> Vec<String> {
        match t.get(key) {
            None => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| match v.as_str() {
                    Some(s) => Some(s.to_owned()),
                    None => {
                        self.errors
                            .push(format!("{path}{key}: expected strings, found {v}"));
                        None
                    }
                })
                .collect(),
            Some(other) => {
                self.errors.push(format!(
                    "{path}{key}: expected an array of strings, found {}",
                    other.type_str()
                ));
                Vec::new()
            }
        }
    }

    /// An array of strings (or one) each parsed with `parse`; the ones that do
    /// not parse are reported.
    pub(super) fn parsed_list<T>(
        &mut self,
        t: &Table,
        path: &str,
        key: &str,
        parse: fn(&str) -> Result<T, String>,
    ) -> Vec<T> {
        let mut out = Vec::new();
        for text in self.strings(t, path, key) {
            match parse(&text) {
                Ok(v) => out.push(v),
                Err(e) => self.errors.push(format!("{path}{key}: {e}")),
            }
        }
        out
    }

    /// A repeated flag's values, each parsed with `parse`; the ones that do not
    /// parse are reported.
    pub(super) fn flag_values<T>(
        &mut self,
        name: &str,
        texts: &[String],
        parse: fn(&str) -> Result<T, String>,
    ) -> Vec<T> {
        let mut out = Vec::new();
        for text in texts {
            match parse(text) {
                Ok(v) => out.push(v),
                Err(e) => self.errors.push(format!("{name} {text}: {e}")),
            }
        }
        out
    }

    /// A repeated flag: when given, its values replace `into`.
    pub(super) fn flag_list<T>(
        &mut self,
        name: &str,
        texts: &[String],
        parse: fn(&str) -> Result<T, String>,
        into: &mut Vec<T>,
    ) {
        if !texts.is_empty() {
            *into = self.flag_values(name, texts, parse);
        }
    }

    /// Reports `error` unless `ok`.
    pub(super) fn check(&mut self, ok: bool, error: &str) {
        if !ok {
            self.errors.push(error.to_owned());
        }
    }

    /// Reports each of `durations` that is zero, its name after `path`.
    pub(super) fn nonzero(&mut self, path: &str, durations: &[(&str, Duration)]) {
        for (name, d) in durations {
            self.check(
                !d.is_zero(),
                &format!("{path}{name}: must be more than zero"),
            );
        }
    }
}
