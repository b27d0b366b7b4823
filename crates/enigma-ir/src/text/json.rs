//! The JSON form: the serde derives of [`crate::ir`] behind a schema
//! version, written by [`to_json`] and read back by [`from_json`].

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
/// reading. Version 2 spells types as their IR names (`"f32x4"`); version 1
/// spelled them as `{"scalar","width"}` objects.
pub const JSON_SCHEMA: u32 = 2;

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

/// Reads the JSON form; a document of another schema version (or none) is an
/// error that says which version this reader takes.
pub fn from_json(json: &str) -> Result<Kernel, JsonError> {
    let err = |e: serde_json::Error| JsonError { line: e.line(), column: e.column(), message: e.to_string() };
    let header: Header = serde_json::from_str(json).map_err(err)?;
    if header.schema != Some(JSON_SCHEMA) {
        let found = header.schema.map_or("no \"schema\" field".to_string(), |v| format!("schema {v}"));
        return Err(JsonError {
            line: 1,
            column: 1,
            message: format!("{found}; this enigma reads IR JSON schema {JSON_SCHEMA}"),
        });
    }
    serde_json::from_str(json).map_err(err)
}
