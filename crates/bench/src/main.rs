//! `damselfly-bench`: a memtier_benchmark-compatible load generator, plus the
//! `compare` subcommand that runs the same scenarios against several servers and the `chart`
//! subcommand that draws the scripts' measurements.

mod chart;
mod compare;
mod keys;
mod opts;
mod proto;
mod pubsub;
mod report;
mod run;
mod sys;

use clap::Parser;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let code = if args.get(1).map(String::as_str) == Some("pubsub") {
        let mut rest = vec![format!("{} pubsub", args[0])];
        rest.extend(args[2..].iter().cloned());
        let o = pubsub::PubSubOpts::parse_from(rest);
        match pubsub::run(&o) {
            Ok(line) => {
                print!("{line}");
                0
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        }
    } else if args.get(1).map(String::as_str) == Some("chart") {
        let mut rest = vec![format!("{} chart", args[0])];
        rest.extend(args[2..].iter().cloned());
        let c = chart::ChartOpts::parse_from(rest);
        match chart::run_chart(&c) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        }
    } else if args.get(1).map(String::as_str) == Some("compare") {
        let mut rest = vec![format!("{} compare", args[0])];
        rest.extend(args[2..].iter().cloned());
        let c = compare::CompareOpts::parse_from(rest);
        match compare::run_compare(&c) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        }
    } else {
        let o = opts::BenchOpts::parse();
        bench_main(&o)
    };
    std::process::exit(code);
}

fn bench_main(o: &opts::BenchOpts) -> i32 {
    if let Some(cpus) = &o.cpus {
        if let Err(e) = sys::pin_current_thread(&cpus.0) {
            eprintln!("error: {e}");
            return 1;
        }
    }
    let res = match run::run(o, !o.hide_progress) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let text = report::render_text(o, &res);
    match &o.out_file {
        Some(path) => {
            if let Err(e) = std::fs::write(path, &text) {
                eprintln!("error: writing {path}: {e}");
                return 1;
            }
        }
        None => print!("{text}"),
    }
    if let Some(path) = &o.json_out_file {
        let v = report::render_json(o, &res);
        let body = match serde_json::to_string_pretty(&v) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error: json: {e}");
                return 1;
            }
        };
        if let Err(e) = std::fs::write(path, body) {
            eprintln!("error: writing {path}: {e}");
            return 1;
        }
    }
    0
}
