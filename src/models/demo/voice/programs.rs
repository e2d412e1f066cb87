//! The two programs the demo's voice runs, found once on `PATH`: `espeak-ng` (speaking) and
//! `pocketsphinx_continuous` with Debian's en-us model (listening). Either may be missing (a
//! machine set up without `scripts/setup.sh`): the demo then says so in plain words and goes on
//! in text.

use std::path::{Path, PathBuf};

/// The synthesizer's program name.
pub const ESPEAK: &str = "espeak-ng";
/// The recogniser's program name.
pub const POCKETSPHINX: &str = "pocketsphinx_continuous";
/// Debian's `pocketsphinx-en-us`: the acoustic model and the pronouncing dictionary.
pub const EN_US_MODEL: &str = "/usr/share/pocketsphinx/model/en-us/en-us";
/// See [`EN_US_MODEL`].
pub const EN_US_DICT: &str = "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict";

/// Where the programs are, if they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Programs {
    pub espeak: Option<PathBuf>,
    pub listener: Option<Listener>,
}

/// The recogniser and its model files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub program: PathBuf,
    pub model: PathBuf,
    pub dict: PathBuf,
}

impl Programs {
    /// Looks on `PATH` (and for the en-us model where Debian puts it).
    pub fn find() -> Programs {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
        let listener = on_path(&dirs, POCKETSPHINX).and_then(|program| {
            let (model, dict) = (PathBuf::from(EN_US_MODEL), PathBuf::from(EN_US_DICT));
            (model.is_dir() && dict.is_file()).then_some(Listener {
                program,
                model,
                dict,
            })
        });
        Programs {
            espeak: on_path(&dirs, ESPEAK),
            listener,
        }
    }

    /// What a person is told when the demo cannot speak or listen here; `None` when it can.
    pub fn missing(&self) -> Option<String> {
        let mut missing = Vec::new();
        if self.espeak.is_none() {
            missing.push("espeak-ng (to speak)");
        }
        if self.listener.is_none() {
            missing.push("pocketsphinx with its en-us model (to listen)");
        }
        (!missing.is_empty()).then(|| {
            format!(
                "This machine lacks {}, so the offline demo answers in text. scripts/setup.sh \
                 installs them.",
                missing.join(" and ")
            )
        })
    }
}

/// The first executable file called `name` in `dirs`.
fn on_path(dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
    dirs.iter()
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_without_the_programs_is_told_what_is_missing_and_how_to_get_it() {
        let none = Programs::default();
        let told = none.missing().unwrap();
        assert!(
            told.contains("espeak-ng") && told.contains("pocketsphinx"),
            "{told}"
        );
        assert!(told.contains("scripts/setup.sh"), "{told}");
        let speaks_only = Programs {
            espeak: Some("/usr/bin/espeak-ng".into()),
            listener: None,
        };
        let told = speaks_only.missing().unwrap();
        assert!(
            !told.contains("espeak") && told.contains("to listen"),
            "{told}"
        );
        assert_eq!(on_path(&[PathBuf::from("/nonexistent")], ESPEAK), None);
    }
}
