//! `damselfly` binary: parse flags and run the server.

#[global_allocator]
static GLOBAL: damselfly::engine::memory::Counting = damselfly::engine::memory::Counting;

fn main() {
    damselfly::install();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let env: Vec<(String, String)> = std::env::vars().collect();
    match damselfly::config::parse_args(&args, &env) {
        Ok(damselfly::config::Startup::Exit(text)) => print!("{text}"),
        Ok(damselfly::config::Startup::Run(cfg)) => {
            if let Err(e) = damselfly::start(*cfg) {
                eprintln!("damselfly: {e}");
                std::process::exit(1);
            }
        }
        Err(damselfly::config::ConfigError::Fatal(blocks)) => {
            eprint!("{blocks}");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("damselfly: {e}");
            std::process::exit(1);
        }
    }
}
