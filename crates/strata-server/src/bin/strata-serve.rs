//! `strata-serve DIR`: the server as its own program (the same as `strata serve`).

use std::io::Write;
use std::process::ExitCode;
use strata_server::{run, ServeOptions, ServerConfig};

const HELP: &str = "\
strata-serve: serve every strata store under a directory over HTTP and OPeNDAP DAP2

usage: strata-serve [DIR] [--config FILE] [--host H] [--port P] [--max-requests N]
                    [--max-seconds S] [--quiet]

  DIR               directory holding stores (or one store); or `root` in the config file
  --config FILE     server.toml: root, host, port, tls_cert/tls_key, [limits], [datasets.NAME] token
  --host H          address to listen on (default 127.0.0.1: this machine only)
  --port P          port (default 8470; 0 picks a free one, printed at start)
  --max-requests N  stop after answering N requests
  --max-seconds S   stop after S seconds
  --quiet           no request log on stderr

routes: /health, /api/datasets, /api/schema/NAME, /api/query/NAME, /api/sql/NAME,
        /dap/NAME.dds|.das|.dods|.ascii (docs/server.md)";

fn parse(args: &[String]) -> Result<ServerConfig, String> {
    let mut o = ServeOptions::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match a.as_str() {
            "--config" => o.config = Some(value("--config")?.into()),
            "--host" => o.host = Some(value("--host")?),
            "--port" => o.port = Some(value("--port")?.parse().map_err(|_| "--port must be a number 0-65535")?),
            "--max-requests" => {
                o.max_requests = Some(value("--max-requests")?.parse().map_err(|_| "--max-requests must be a count")?)
            }
            "--max-seconds" => {
                o.max_seconds = Some(value("--max-seconds")?.parse().map_err(|_| "--max-seconds must be a number")?)
            }
            "--quiet" => o.quiet = true,
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            dir if o.root.is_none() => o.root = Some(dir.into()),
            extra => return Err(format!("one directory only ('{extra}' is a second)")),
        }
    }
    o.resolve()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        // Not println!: `strata-serve --help | head` must not panic on the closed pipe.
        let _ = writeln!(std::io::stdout(), "{HELP}");
        return ExitCode::SUCCESS;
    }
    let config = match parse(&args) {
        Ok(c) => c,
        Err(e) => {
            strata_server::log!("strata-serve: {e}\n\n{HELP}");
            return ExitCode::from(2);
        }
    };
    match run(config, |url| strata_server::log!("strata serve: listening on {url}")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            strata_server::log!("strata-serve: {e}");
            ExitCode::from(1)
        }
    }
}
