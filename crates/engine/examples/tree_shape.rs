//! Fills a tree with random keys and prints its shape and the engine's counters: a quick way
//! to see node sizes, buffered bytes and I/O for a configuration.
//! Usage: `cargo run --release -p shale-engine --example tree_shape -- <data MiB> <cache MiB> [node KiB]`

use shale_engine::{Env, EnvOptions, FsyncPolicy, TreeOptions, WriteBatch};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<u64>())
        .collect::<Result<Vec<_>, _>>()?;
    let data_mib = args.first().copied().unwrap_or(32);
    let cache_mib = args.get(1).copied().unwrap_or(8);
    let node_kib = args.get(2).copied().unwrap_or(4096);
    let dir = tempfile::tempdir_in(".")?;
    let options = EnvOptions {
        cache_bytes: (cache_mib << 20) as usize,
        tree_defaults: TreeOptions {
            node_size_bytes: (node_kib << 10) as usize,
            ..TreeOptions::default()
        },
        fsync: FsyncPolicy::EveryMillis(100),
        checkpoint_interval: None,
        ..EnvOptions::default()
    };
    let env = Env::open(dir.path(), options)?;
    let t = env.create_tree("t", None)?;
    let n = (data_mib << 20) / 116;
    let started = Instant::now();
    let mut rng = shale_testkit::Rng(0x9e37_79b9_7f4a_7c15);
    for chunk in 0..n.div_ceil(100) {
        let mut b = WriteBatch::new();
        for i in 0..100.min(n - chunk * 100) {
            let x = rng.next();
            let key = [x.to_be_bytes(), (chunk * 100 + i).to_be_bytes()].concat();
            b.put(&t, &key, &[(x % 7) as u8; 100]);
        }
        env.write(b)?;
    }
    println!("filled {n} keys in {:.1}s", started.elapsed().as_secs_f64());
    println!("right after the fill: {:#?}", t.verify()?);
    std::thread::sleep(std::time::Duration::from_secs(3));
    env.checkpoint()?;
    println!("3 s later: {:#?}", t.verify()?);
    let c = env.counters();
    println!(
        "cache used {} peak {} budget {}",
        c.cache_used_bytes, c.cache_peak_bytes, c.cache_budget_bytes
    );
    println!("io {:?}", c.io);
    env.close()?;
    Ok(())
}
