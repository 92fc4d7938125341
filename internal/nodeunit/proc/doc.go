// Package proc supervises the local processes of a node-unit: one process
// per deployment id, restarted when it exits, stopped gracefully, with its
// output kept in a log file.
//
// # Starting
//
// [Runner.Start] takes a [Spec] (an id, a command, its arguments and extra
// environment). The command must match [Config.Trusted] as a whole (the
// expression is anchored at both ends); a command that does not match is
// never run: Start returns an [*UntrustedError] and logs the refusal, once
// at warning level for each id and command, then at debug level. A nil
// Trusted refuses every command.
//
// The process gets the node-unit's own environment plus the [Spec]'s
// variables (the Spec wins on a clash), runs in a process group of its own,
// and writes its standard output and error to
// [Config.LogDir]/<escaped id>.log, opened for appending, so the file keeps
// the output of every run. On Linux the process also gets SIGKILL when the
// node-unit dies without stopping it (PR_SET_PDEATHSIG), so a crashed
// node-unit does not leave its deployments running unsupervised.
//
// # Restarting
//
// A process that exits, whatever its status, is started again after a
// backoff that doubles from [Config.MinBackoff] up to [Config.MaxBackoff].
// A run that lasted at least [Config.ResetAfter] resets the backoff. When
// the leader of a process group exits, what remains of its group is killed
// before the next start, so a restart never runs next to leftovers of the
// previous run. The id stays in [Runner.Running] while it waits to be
// restarted: the supervisor owns it until [Runner.Stop].
//
// # Stopping
//
// [Runner.Stop] sends SIGTERM to the process group, waits up to
// [Config.StopGrace] for the process to exit, then sends SIGKILL to the
// group. [Runner.Close] stops every process at once and refuses further
// starts.
//
// # Concurrency
//
// Every method is safe for concurrent use. Each supervised id has one
// goroutine, owned by the Runner and waited for by Stop and Close. Time
// (backoff and grace period) comes from [Config.Clock], so tests can drive
// it.
package proc
