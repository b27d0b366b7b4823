//! [`Error`]: everything that can go wrong in an operation.

use enigma_kernels::library::select::SelectError;
use enigma_kernels::library::quant::QuantError;
use enigma_kernels::library::ShapeError;
use enigma_runtime::RuntimeError;

/// Everything that can go wrong in an operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// A 4-bit weight shape or buffer the formats cannot take.
    #[error(transparent)]
    Quant(#[from] QuantError),
    /// A buffer that does not fit the operation (too small, wrong type).
    #[error("{op}: {message}")]
    Argument { op: String, message: String },
}

impl From<SelectError> for Error {
    fn from(e: SelectError) -> Error {
        match e {
            SelectError::Shape(e) => Error::Shape(e),
            SelectError::Argument { op, message } => Error::Argument { op, message },
        }
    }
}

pub(crate) fn arg_err(op: &str, message: impl Into<String>) -> Error {
    Error::Argument { op: op.to_string(), message: message.into() }
}
