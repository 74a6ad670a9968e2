//! TLS settings for client connections, as mongod's `net.tls.*`: the mode (`disabled`,
//! `allowTLS`, `preferTLS`, `requireTLS`), the server's certificate and key
//! (`tlsCertificateKeyFile`: one PEM file holding the chain and the key), and the CA that
//! client certificates must chain to (`tlsCAFile`; without it clients are not asked for
//! one; with it they must present one unless `tlsAllowConnectionsWithoutCertificates`).
//! `load` turns the settings into a rustls server configuration (ring provider, TLS 1.2 and
//! 1.3) once at start-up; `transport` uses it per connection. It never touches a socket.

use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// mongod's `net.tls.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// No TLS: every connection is plain text.
    #[default]
    Disabled,
    /// Both; the server would not use TLS for its own outgoing connections (it makes none).
    AllowTls,
    /// Both; the server would use TLS for its own outgoing connections (it makes none).
    PreferTls,
    /// TLS only: a plain-text client is disconnected.
    RequireTls,
}

impl TlsMode {
    /// Parses mongod's spelling.
    pub fn parse(text: &str) -> Option<TlsMode> {
        match text {
            "disabled" => Some(TlsMode::Disabled),
            "allowTLS" => Some(TlsMode::AllowTls),
            "preferTLS" => Some(TlsMode::PreferTls),
            "requireTLS" => Some(TlsMode::RequireTls),
            _ => None,
        }
    }

    /// mongod's spelling.
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::AllowTls => "allowTLS",
            TlsMode::PreferTls => "preferTLS",
            TlsMode::RequireTls => "requireTLS",
        }
    }
}

/// The TLS options as given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsSettings {
    /// `tlsMode`.
    pub mode: TlsMode,
    /// `tlsCertificateKeyFile`: the server's certificate chain and private key, PEM.
    pub certificate_key_file: Option<PathBuf>,
    /// `tlsCAFile`: the CA certificates client certificates are verified against, PEM.
    pub ca_file: Option<PathBuf>,
    /// `tlsAllowConnectionsWithoutCertificates`: with a CA file, clients may still
    /// connect without a certificate (one they do present must verify).
    pub allow_connections_without_certificates: bool,
}

/// TLS as the server runs it: the mode and, unless disabled, the rustls configuration.
#[derive(Debug, Clone)]
pub struct Tls {
    /// `tlsMode`.
    pub mode: TlsMode,
    /// The rustls configuration handshakes use.
    pub config: Arc<rustls::ServerConfig>,
}

/// Why the TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The mode needs a certificate and key file and none was given.
    #[error("tlsMode {0} needs tlsCertificateKeyFile (the server's certificate and key, PEM)")]
    NoCertificateKeyFile(&'static str),
    /// A TLS option was given with TLS disabled.
    #[error("{option} is set but tlsMode is disabled")]
    OptionWithoutTls {
        /// The option's name.
        option: &'static str,
    },
    /// A PEM file could not be read or parsed.
    #[error("cannot read {path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A PEM file lacks what it must hold.
    #[error("{path} holds no {what}")]
    Missing {
        /// The file.
        path: PathBuf,
        /// What it lacks (a certificate, a private key).
        what: &'static str,
    },
    /// The CA file's certificates are unusable.
    #[error("the CA file {path}: {message}")]
    BadCa {
        /// The CA file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// rustls refused the certificate and key.
    #[error("the certificate and key in {path}: {source}")]
    Rustls {
        /// The certificate and key file.
        path: PathBuf,
        /// What rustls said.
        #[source]
        source: rustls::Error,
    },
}

/// The TLS the server runs with: `None` when disabled.
pub fn load(settings: &TlsSettings) -> Result<Option<Tls>, TlsError> {
    if settings.mode == TlsMode::Disabled {
        return match (&settings.certificate_key_file, &settings.ca_file) {
            (Some(_), _) => Err(TlsError::OptionWithoutTls {
                option: "tlsCertificateKeyFile",
            }),
            (_, Some(_)) => Err(TlsError::OptionWithoutTls {
                option: "tlsCAFile",
            }),
            _ => Ok(None),
        };
    }
    let key_file = settings
        .certificate_key_file
        .as_deref()
        .ok_or(TlsError::NoCertificateKeyFile(settings.mode.name()))?;
    let chain = certificates(key_file)?;
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| pem_error(key_file, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Rustls {
            path: key_file.to_owned(),
            source,
        })?;
    let builder = match &settings.ca_file {
        None => builder.with_no_client_auth(),
        Some(ca_file) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(ca_file)? {
                roots.add(cert).map_err(|e| TlsError::BadCa {
                    path: ca_file.clone(),
                    message: e.to_string(),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if settings.allow_connections_without_certificates {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier.build().map_err(|e| TlsError::BadCa {
                path: ca_file.clone(),
                message: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|source| TlsError::Rustls {
            path: key_file.to_owned(),
            source,
        })?;
    Ok(Some(Tls {
        mode: settings.mode,
        config: Arc::new(config),
    }))
}

/// Every certificate in a PEM file; at least one.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e))?;
    if certs.is_empty() {
        return Err(TlsError::Missing {
            path: path.to_owned(),
            what: "certificate",
        });
    }
    Ok(certs)
}

fn pem_error(path: &Path, e: rustls_pki_types::pem::Error) -> TlsError {
    match e {
        rustls_pki_types::pem::Error::NoItemsFound => TlsError::Missing {
            path: path.to_owned(),
            what: "private key",
        },
        other => TlsError::Pem {
            path: path.to_owned(),
            message: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_with_mongods_names_and_options_need_tls() {
        for mode in ["disabled", "allowTLS", "preferTLS", "requireTLS"] {
            assert_eq!(TlsMode::parse(mode).map(TlsMode::name), Some(mode));
        }
        assert_eq!(TlsMode::parse("requireSSL"), None);
        assert!(load(&TlsSettings::default()).expect("disabled").is_none());
        let no_key = TlsSettings {
            mode: TlsMode::RequireTls,
            ..TlsSettings::default()
        };
        assert!(matches!(
            load(&no_key),
            Err(TlsError::NoCertificateKeyFile(_))
        ));
        let ca_alone = TlsSettings {
            ca_file: Some("ca.pem".into()),
            ..TlsSettings::default()
        };
        assert!(matches!(
            load(&ca_alone),
            Err(TlsError::OptionWithoutTls { .. })
        ));
        let missing = TlsSettings {
            mode: TlsMode::PreferTls,
            certificate_key_file: Some("/nonexistent/server.pem".into()),
            ..TlsSettings::default()
        };
        assert!(matches!(load(&missing), Err(TlsError::Pem { .. })));
    }
}
