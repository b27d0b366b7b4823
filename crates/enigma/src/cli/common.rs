//! Argument parsers and output helpers shared by the analysis subcommands
//! (`geometry`, `occupancy`, `tiles`, `info`).

use anyhow::Context;
use enigma_analysis::catalog::{self, DeviceSpec};
use std::io::Write as _;

/// Parses `X[,Y[,Z]]` (also `X×Y` / `XxY`); missing axes are 1.
pub fn parse_dims(s: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = s.split([',', 'x', 'X', '×']).map(str::trim).collect();
    if parts.is_empty() || parts.len() > 3 || parts.iter().any(|p| p.is_empty()) {
        return Err(format!("`{s}` is not a size: expected X, X,Y or X,Y,Z"));
    }
    let mut out = [1u32; 3];
    for (i, p) in parts.iter().enumerate() {
        out[i] = p.parse::<u32>().map_err(|e| format!("`{p}` in `{s}` is not a 32-bit unsigned count: {e}"))?;
    }
    Ok(out)
}

/// Parses `RxC` / `R,C` into two counts.
pub fn parse_pair(s: &str) -> Result<[u32; 2], String> {
    let d = parse_dims(s)?;
    if s.split([',', 'x', 'X', '×']).count() != 2 {
        return Err(format!("`{s}` is not a pair: expected RxC"));
    }
    Ok([d[0], d[1]])
}

/// Looks a catalogue device up, with the list of known ids on failure.
pub fn device(name: &str) -> anyhow::Result<DeviceSpec> {
    catalog::find(name).with_context(|| format!("looking up device `{name}`"))
}

/// Prints `label  value` lines with the labels padded to one column.
pub fn print_pairs(pairs: &[(String, String)]) {
    let width = pairs.iter().map(|(l, _)| l.chars().count()).max().unwrap_or(0);
    for (label, value) in pairs {
        let pad = width - label.chars().count();
        println!("  {label}{}  {value}", " ".repeat(pad));
    }
}

/// Prints rows as a table with a header, columns padded to their widest cell.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            let w = widths.get(i).copied().unwrap_or(0);
            out.push_str(c);
            if i + 1 < cells.len() {
                out.push_str(&" ".repeat(w - c.chars().count() + 2));
            }
        }
        out.truncate(out.trim_end().len());
        out
    };
    // Written with errors checked: a reader that closes the pipe early
    // (`| head`) ends the table instead of panicking.
    let mut stdout = std::io::stdout().lock();
    let lines = [line(header.iter().map(|h| h.to_string()).collect()), line(widths.iter().map(|w| "-".repeat(*w)).collect())]
        .into_iter()
        .chain(rows.iter().map(|r| line(r.clone())));
    for text in lines {
        if writeln!(stdout, "{text}").is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_dims("4000,3000"), Ok([4000, 3000, 1]));
        assert_eq!(parse_dims("32x16"), Ok([32, 16, 1]));
        assert_eq!(parse_dims("7"), Ok([7, 1, 1]));
        assert_eq!(parse_dims("1,2,3"), Ok([1, 2, 3]));
        assert!(parse_dims("1,2,3,4").is_err());
        assert!(parse_dims("a").is_err());
        assert!(parse_dims("").is_err());
        assert_eq!(parse_pair("2x2"), Ok([2, 2]));
        assert!(parse_pair("2").is_err());
    }
}
