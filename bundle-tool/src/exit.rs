//! Command errors and exit codes.
//!
//! Every command returns `Result<(), CmdError>`. A [`CmdError::User`] is bad input or a
//! validation failure (exit 1) and is printed as `error: ...` followed by `hint: ...` lines;
//! [`CmdError::Reported`] means the command already printed its findings (exit 1);
//! [`CmdError::Unexpected`] is everything else (exit 2), printed with its cause chain.

use std::fmt::Display;
use std::process::ExitCode;

/// Exit code of a validation or user error.
pub const USER: u8 = 1;
/// Exit code of an unexpected failure.
pub const UNEXPECTED: u8 = 2;

/// Why a command failed.
#[derive(Debug)]
pub enum CmdError {
    /// Bad input or a failed check, with hints on how to fix it.
    User {
        /// The error, with its cause chain.
        error: anyhow::Error,
        /// `hint:` lines.
        hints: Vec<String>,
    },
    /// The command already printed what went wrong (e.g. a validation report).
    Reported,
    /// A failure that is not the user's fault.
    Unexpected(anyhow::Error),
}

impl CmdError {
    /// A user error from anything printable.
    pub fn user(error: impl Into<anyhow::Error>) -> Self {
        CmdError::User {
            error: error.into(),
            hints: Vec::new(),
        }
    }
    /// A user error from a message.
    pub fn msg(message: impl Display) -> Self {
        CmdError::User {
            error: anyhow::anyhow!("{message}"),
            hints: Vec::new(),
        }
    }
    /// An unexpected error.
    pub fn unexpected(error: impl Into<anyhow::Error>) -> Self {
        CmdError::Unexpected(error.into())
    }
    /// Adds a `hint:` line (ignored for `Reported`).
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        if let CmdError::User { hints, .. } = &mut self {
            hints.push(hint.into());
        }
        self
    }
}

/// Shorthands to classify library errors at the command boundary.
pub trait ResultExt<T> {
    /// Classifies the error as the user's (exit 1).
    fn user_err(self) -> Result<T, CmdError>;
    /// Classifies the error as the user's and adds a hint.
    fn user_hint(self, hint: impl Into<String>) -> Result<T, CmdError>;
    /// Classifies the error as unexpected (exit 2).
    fn unexpected_err(self) -> Result<T, CmdError>;
}

impl<T, E: Into<anyhow::Error>> ResultExt<T> for Result<T, E> {
    fn user_err(self) -> Result<T, CmdError> {
        self.map_err(CmdError::user)
    }
    fn user_hint(self, hint: impl Into<String>) -> Result<T, CmdError> {
        self.map_err(|e| CmdError::user(e).hint(hint))
    }
    fn unexpected_err(self) -> Result<T, CmdError> {
        self.map_err(CmdError::unexpected)
    }
}

fn print_chain(prefix: &str, error: &anyhow::Error) {
    eprintln!("{prefix}: {error}");
    for cause in error.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
}

/// Prints the error (if any) to stderr and returns the exit code.
pub fn report(result: Result<(), CmdError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CmdError::Reported) => ExitCode::from(USER),
        Err(CmdError::User { error, hints }) => {
            print_chain("error", &error);
            for h in hints {
                eprintln!("hint: {h}");
            }
            ExitCode::from(USER)
        }
        Err(CmdError::Unexpected(error)) => {
            print_chain("error (unexpected)", &error);
            eprintln!("hint: this is a bug or an environment problem; rerun with -v for details");
            ExitCode::from(UNEXPECTED)
        }
    }
}
