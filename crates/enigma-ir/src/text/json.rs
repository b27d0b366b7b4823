//! The JSON form: the serde derives of [`crate::ir`] behind a schema
//! version, written by [`to_json`] and read back by [`from_json`].

use super::parse::MAX_NESTING;
use crate::ir::Kernel;
use thiserror::Error;

/// A JSON-form read error, with the position serde_json reports.
#[derive(Clone, Debug, Error, PartialEq)]
#[error("invalid kernel JSON at line {line}, column {column}: {message}")]
pub struct JsonError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// The version of the JSON form, written first as `"schema"` and checked on
/// reading. Version 4 names a call's function and its precision apart
/// (`{"func":"exp","precision":"fast"}`, the precision left out when it is
/// the default); versions 2 and 3, which this reader also takes, named the
/// `fast::` and `precise::` variants as functions of their own
/// (`"fast_exp"`, `"precise_sin"`), read as version 4's pair. Version 3 gave
/// each quantized tile load its packed-word `"layout"`; version 2 had none
/// (its loads read as `"rows"`, seed 002's layout, the only one it had), and
/// spelled types as their IR names (`"f32x4"`) like versions 3 and 4;
/// version 1 spelled them as `{"scalar","width"}` objects.
pub const JSON_SCHEMA: u32 = 4;

/// The versions [`from_json`] reads: [`JSON_SCHEMA`] and those whose
/// documents it reads the same way or translates.
pub const READABLE_JSON_SCHEMAS: [u32; 3] = [2, 3, JSON_SCHEMA];

#[derive(serde::Serialize)]
struct Versioned<'a> {
    schema: u32,
    #[serde(flatten)]
    kernel: &'a Kernel,
}

#[derive(serde::Deserialize)]
struct Header {
    schema: Option<u32>,
}

/// The JSON form of `kernel`, on one line.
pub fn to_json(kernel: &Kernel) -> String {
    serde_json::to_string(&Versioned { schema: JSON_SCHEMA, kernel })
        .expect("a Kernel is plain data with string keys; serialising it cannot fail")
}

/// The JSON form of `kernel`, indented.
pub fn to_json_pretty(kernel: &Kernel) -> String {
    serde_json::to_string_pretty(&Versioned { schema: JSON_SCHEMA, kernel })
        .expect("a Kernel is plain data with string keys; serialising it cannot fail")
}

/// The deepest JSON nesting [`from_json`] reads: enough for every kernel
/// within [`MAX_NESTING`] (an expression or block level takes a few JSON
/// levels), where serde_json's own limit of 128 JSON levels stopped kernels
/// far shallower than the text form reads.
pub const MAX_JSON_DEPTH: usize = 8 * MAX_NESTING as usize;

/// Reads the JSON form. A document of a schema version it does not read
/// ([`READABLE_JSON_SCHEMAS`]), or of none, is an error that says which
/// versions this reader takes; nesting past
/// [`MAX_JSON_DEPTH`] is an error naming the limit (checked before parsing,
/// so a deep document never reaches the recursive parser).
pub fn from_json(json: &str) -> Result<Kernel, JsonError> {
    if let Some((line, column)) = too_deep(json, MAX_JSON_DEPTH) {
        return Err(JsonError {
            line,
            column,
            message: format!(
                "nested more than {MAX_JSON_DEPTH} levels deep; the IR allows {MAX_NESTING} levels of nested expressions and blocks"
            ),
        });
    }
    let header: Header = read_unbounded(json)?;
    if !header.schema.is_some_and(|v| READABLE_JSON_SCHEMAS.contains(&v)) {
        let found = header.schema.map_or("no \"schema\" field".to_string(), |v| format!("schema {v}"));
        return Err(JsonError {
            line: 1,
            column: 1,
            message: format!("{found}; this enigma reads IR JSON schema {JSON_SCHEMA} (and 2, 3)"),
        });
    }
    let direct = read_unbounded(json);
    if header.schema == Some(JSON_SCHEMA) || direct.is_ok() {
        return direct;
    }
    // An older document that calls a `fast_*` or `precise_*` function; any
    // other error is reported where serde_json found it.
    let mut document: serde_json::Value = read_unbounded(json)?;
    split_precision_names(&mut document);
    serde_json::from_value(document).or(direct)
}

/// Rewrites the calls of a version-2 or -3 document, which named a
/// function's `fast::` and `precise::` variants as functions of their own
/// (`"func":"fast_exp"`), into version 4's function and precision.
fn split_precision_names(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(fields) => {
            if let Some(Value::Object(call)) = fields.get_mut("call") {
                let renamed = call.get("func").and_then(Value::as_str).and_then(|name| {
                    ["fast", "precise"]
                        .into_iter()
                        .find_map(|ns| name.strip_prefix(ns).and_then(|rest| rest.strip_prefix('_')).map(|f| (ns, f.to_string())))
                });
                if let Some((namespace, func)) = renamed {
                    call.insert("func".into(), Value::String(func));
                    call.insert("precision".into(), Value::String(namespace.into()));
                }
            }
            fields.values_mut().for_each(split_precision_names);
        }
        Value::Array(items) => items.iter_mut().for_each(split_precision_names),
        _ => {}
    }
}

/// Deserialises `json` without serde_json's recursion limit (its depth was
/// checked by [`too_deep`]).
fn read_unbounded<T: serde::de::DeserializeOwned>(json: &str) -> Result<T, JsonError> {
    let mut de = serde_json::Deserializer::from_str(json);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    value.map_err(|e| JsonError { line: e.line(), column: e.column(), message: e.to_string() })
}

/// The line and column (1-based) where `json` first opens more than `limit`
/// nested arrays or objects, if it does (brackets inside strings excluded).
fn too_deep(json: &str, limit: usize) -> Option<(usize, usize)> {
    let (mut depth, mut line, mut column) = (0usize, 1usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        column += 1;
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' => {
                depth += 1;
                if depth > limit {
                    return Some((line, column));
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            '\n' => {
                line += 1;
                column = 0;
            }
            _ => {}
        }
    }
    None
}
