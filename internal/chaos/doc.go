// Package chaos proves that limiterd holds under attack and accident, as
// programs anyone can rerun (docs/reliability.md): a flood of distinct peers
// against max_tracked (Flood), kill -9 at random moments under load with
// live edits in between, alone and in cluster mode with Redis killed too
// (CrashLoop, ClusterCrashLoop), a long steady mixed load watched for
// leaks (Soak), and restarts under load on sockets held as systemd holds
// them, every request answered once (Restarts); and what a client puts on
// the node: clients that hang up on a node that does not notice (Aborts),
// slow readers holding answers while a victim is timed (SlowReaders), a
// flood of distinct peers through the check API (CheckFlood).
//
// Every driver runs the built limiterd binary as a child process on
// loopback ports, with a stand-in node (fasthttp or net/http) and the load
// generators in this process, and returns its figures and the violations it found; the
// commands of internal/chaos/cmd/chaos and the scripts internal/chaos/*.sh run the long
// variants, the package's tests the short ones.
package chaos
