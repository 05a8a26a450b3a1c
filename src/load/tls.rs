//! https for `tacho load`: rustls through tokio-rustls (the `tls` feature), the server's
//! certificate verified against the system's roots unless `--insecure`, HTTP/2 agreed by ALPN.

#[cfg(feature = "tls")]
mod with {
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::crypto::CryptoProvider;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
    use std::sync::Arc;
    use tokio::net::TcpStream;
    use tokio_rustls::TlsConnector;
    use tokio_rustls::client::TlsStream;

    /// How to open TLS to one origin.
    pub struct Tls {
        connector: TlsConnector,
        name: ServerName<'static>,
        /// Only HTTP/2 was offered (`--http2`).
        http2_only: bool,
    }

    impl Tls {
        /// TLS to `host`: its certificate checked against the system's roots (none at all
        /// with `insecure`); ALPN offers h2 and http/1.1, or only h2 with `http2_only`.
        pub fn new(host: &str, insecure: bool, http2_only: bool) -> Result<Tls, String> {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("cannot set up TLS: {e}"))?;
            let mut config = if insecure {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
                    .with_no_client_auth()
            } else {
                let mut roots = RootCertStore::empty();
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
                builder.with_root_certificates(roots).with_no_client_auth()
            };
            config.alpn_protocols = if http2_only {
                vec![b"h2".to_vec()]
            } else {
                vec![b"h2".to_vec(), b"http/1.1".to_vec()]
            };
            let name = ServerName::try_from(host.to_string()).map_err(|_| {
                format!(
                    "{:?} is not a name a TLS certificate can carry",
                    crate::text::Escaped(host).to_string()
                )
            })?;
            Ok(Tls {
                connector: TlsConnector::from(Arc::new(config)),
                name,
                http2_only,
            })
        }

        /// The TLS handshake over `stream`: the stream, whether HTTP/2 was agreed, and the
        /// TLS version.
        pub async fn connect(
            &self,
            stream: TcpStream,
        ) -> Result<(TlsStream<TcpStream>, bool, String), String> {
            let stream = self
                .connector
                .connect(self.name.clone(), stream)
                .await
                .map_err(|e| {
                    let text = e.to_string();
                    if text.contains("certificate") {
                        format!(
                            "TLS: {text}; --insecure skips the check (a test server's \
                             self-signed certificate)"
                        )
                    } else {
                        format!("TLS: {text}")
                    }
                })?;
            let session = stream.get_ref().1;
            let h2 = session.alpn_protocol() == Some(b"h2");
            if self.http2_only && !h2 {
                return Err(
                    "the server did not agree to HTTP/2 (ALPN h2); leave out --http2".into(),
                );
            }
            let version = session
                .protocol_version()
                .map_or_else(|| "TLS".to_string(), |v| format!("{v:?}"));
            Ok((stream, h2, version))
        }
    }

    /// `--insecure`: any certificate is taken; the handshake's signatures are still checked
    /// (the connection is encrypted, only to a server not proven to be who it says).
    #[derive(Debug)]
    struct NoVerify(Arc<CryptoProvider>);

    impl ServerCertVerifier for NoVerify {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}

#[cfg(feature = "tls")]
pub use with::Tls;

/// Without the `tls` feature there is no https: an https URL is refused when the client is
/// made, and no value of this type exists.
#[cfg(not(feature = "tls"))]
pub enum Tls {}

#[cfg(not(feature = "tls"))]
impl Tls {
    /// The error saying which feature https needs.
    pub fn new(_: &str, _: bool, _: bool) -> Result<Tls, String> {
        Err(crate::features::Missing(crate::features::Feature::Tls).to_string())
    }

    /// Never called: no `Tls` exists.
    pub async fn connect(
        &self,
        _: tokio::net::TcpStream,
    ) -> Result<(tokio::net::TcpStream, bool, String), String> {
        match *self {}
    }
}

#[cfg(test)]
mod tests {
    /// Without the `tls` feature an https target is one line naming the feature; with it, an
    /// IP address or a host name is a name to check the certificate against.
    #[test]
    fn https_needs_the_tls_feature() {
        let made = super::Tls::new("127.0.0.1", false, false);
        if cfg!(feature = "tls") {
            assert!(made.is_ok() && super::Tls::new("example.test", true, true).is_ok());
        } else {
            assert!(made.is_err_and(|e| e.contains("--features tls")));
        }
    }
}
