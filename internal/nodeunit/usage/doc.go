// Package usage measures a node-unit's resource usage and serves it as
// NodeUnit/InspectResourceUsage, and reads other node-units' usage over
// HTTP for the claim loop's resource_usage policy.
//
// # Collecting
//
// A [Collector] samples, every [Config.Interval] (default 1 s), the node-unit
// process, every process descending from it, and every member of the
// process groups of its deployment processes ([Config.Roots]), so that a
// deployment's own children count even when they were reparented. It reads
// the processes through gopsutil (github.com/shirou/gopsutil/v4), on
// Linux, macOS and Windows alike:
//
//   - cpu_percent is the CPU time (user and system) these processes used
//     since the previous sample divided by the CPU time the whole machine
//     had in the same span (every core summed, idle included), times 100:
//     a share of the total CPU capacity, 0-100, whatever the core count. A
//     process that appeared since the previous sample counts with all its
//     CPU time; a process that ended between two samples loses its last
//     slice. The first sample reports 0.
//   - memory_mb is the sum of their resident set sizes, in MiB.
//
// Windows has no process groups: there, a deployment's processes count
// while they descend from the node-unit or from the deployment's own
// process. When the processes cannot be read at all, the collector reports
// zeros and logs the error once.
//
// # Serving and probing
//
// [Handler] serves the latest reading at [Path]
// (GET /NodeUnit/InspectResourceUsage; POST with any body is accepted too,
// the RPC's request being empty) as JSON:
//
//	{"cpu_percent": 3.5, "memory_mb": 41.2}
//
// [Probe] is the matching [claim.UsageProbe]: it GETs a node-unit's
// [claim.NodeUnit.UsageEndpoint] under the caller's context, fails on a
// status other than 200, and decodes the body with [Decode], which rejects
// missing, negative or non-finite values.
package usage
