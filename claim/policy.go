package claim

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Policy names ([ParsePolicy]); cmd/nodeunit reads them from
// NODE_UNIT_CLAIM_POLICY.
const (
	// PolicyDeploymentCount is the default: the nodes with the fewest
	// deployments claim.
	PolicyDeploymentCount = "deployment_count"
	// PolicyResourceUsage: the nodes with the lowest weighted CPU and memory
	// score claim.
	PolicyResourceUsage = "resource_usage"
	// PolicyNone: nothing is claimed or released; the loop keeps running
	// what is bound to the node and every enabled daemon.
	PolicyNone = "none"
)

// Metric keys of the built-in providers.
const (
	MetricDeploymentCount = "deployment_count"
	MetricResourceUsage   = "resource_usage"
)

// MetricSnapshot is one metric of one node-unit; smaller values claim first.
type MetricSnapshot struct {
	Key   string
	Value float64
}

// MetricContext is what a [MetricProvider] evaluates a node against.
type MetricContext struct {
	// Deployments are the cycle's valid enabled deployments; over a
	// [Viewer] only those the cycle read (this node's, the daemons and the
	// candidates): use DeploymentCounts for counts.
	Deployments []Deployment
	// DeploymentCounts maps every active node to its number of enabled
	// deployments of type deployment (see [DeploymentCounts]).
	DeploymentCounts map[string]int
	// ResourceUsage maps a node to its probed usage; a node without a
	// reading is absent.
	ResourceUsage map[string]Usage
}

// MetricProvider computes one metric of a node-unit.
type MetricProvider interface {
	Key() string
	Evaluate(address string, c MetricContext) MetricSnapshot
}

// Policy decides which node-units may claim in a cycle.
type Policy interface {
	// Name is the policy's name, such as "deployment_count". A policy named
	// [PolicyNone] disables every address write.
	Name() string
	// Providers are the metrics PickEligible needs.
	Providers() []MetricProvider
	// PickEligible returns the nodes, in the order of nodes, that may claim
	// given every node's snapshots.
	PickEligible(nodes []string, snapshots map[string][]MetricSnapshot) []string
}

// DeploymentCountProvider is the deployment_count metric: the node's number
// of enabled deployments of type deployment.
type DeploymentCountProvider struct{}

// Key returns "deployment_count".
func (DeploymentCountProvider) Key() string { return MetricDeploymentCount }

// Evaluate returns c.DeploymentCounts[address] (0 when absent).
func (DeploymentCountProvider) Evaluate(address string, c MetricContext) MetricSnapshot {
	return MetricSnapshot{Key: MetricDeploymentCount, Value: float64(c.DeploymentCounts[address])}
}

// Weights weigh CPU and memory in the resource_usage score.
type Weights struct {
	CPU    float64 // weight of cpu_percent; default 0.5
	Memory float64 // weight of memory_mb/1024 (GB); default 0.5
}

// DefaultWeights weigh CPU and memory equally: 0.5 each.
var DefaultWeights = Weights{CPU: 0.5, Memory: 0.5}

// Score returns u.CPUPercent*w.CPU + u.MemoryMB/1024*w.Memory.
func (w Weights) Score(u Usage) float64 {
	return u.CPUPercent*w.CPU + u.MemoryMB/1024*w.Memory
}

// ResourceUsageProvider is the resource_usage metric: the weighted score of
// the node's probed usage, 0 for a node without a reading.
type ResourceUsageProvider struct {
	Weights Weights
}

// Key returns "resource_usage".
func (ResourceUsageProvider) Key() string { return MetricResourceUsage }

// Evaluate returns the score of c.ResourceUsage[address], or 0 when the node
// has no reading (a failed or timed-out probe).
func (p ResourceUsageProvider) Evaluate(address string, c MetricContext) MetricSnapshot {
	u, ok := c.ResourceUsage[address]
	if !ok {
		return MetricSnapshot{Key: MetricResourceUsage, Value: 0}
	}
	return MetricSnapshot{Key: MetricResourceUsage, Value: p.Weights.Score(u)}
}

// MinimumPolicy makes eligible the nodes whose value of one metric equals
// the minimum over all nodes; ties are all eligible. A node without a
// snapshot of the metric counts as 0.
type MinimumPolicy struct {
	PolicyName string
	Provider   MetricProvider
}

// Name returns p.PolicyName.
func (p MinimumPolicy) Name() string { return p.PolicyName }

// Providers returns p.Provider.
func (p MinimumPolicy) Providers() []MetricProvider { return []MetricProvider{p.Provider} }

// PickEligible returns the nodes at the minimum, in the order of nodes.
func (p MinimumPolicy) PickEligible(nodes []string, snapshots map[string][]MetricSnapshot) []string {
	return pickMinimum(nodes, snapshots, p.Provider.Key())
}

func pickMinimum(nodes []string, snapshots map[string][]MetricSnapshot, key string) []string {
	if len(nodes) == 0 {
		return nil
	}
	values := make([]float64, len(nodes))
	min := math.Inf(1)
	for i, n := range nodes {
		for _, s := range snapshots[n] {
			if s.Key == key {
				values[i] = s.Value
				break
			}
		}
		if values[i] < min {
			min = values[i]
		}
	}
	var out []string
	for i, n := range nodes {
		if values[i] == min {
			out = append(out, n)
		}
	}
	return out
}

type nonePolicy struct{}

func (nonePolicy) Name() string                                                { return PolicyNone }
func (nonePolicy) Providers() []MetricProvider                                 { return nil }
func (nonePolicy) PickEligible([]string, map[string][]MetricSnapshot) []string { return nil }

// DeploymentCountPolicy returns the deployment_count policy (the default):
// the nodes with the fewest deployments are eligible.
func DeploymentCountPolicy() Policy {
	return MinimumPolicy{PolicyName: PolicyDeploymentCount, Provider: DeploymentCountProvider{}}
}

// ResourceUsagePolicy returns the resource_usage policy: the nodes with the
// lowest score cpu_percent*w.CPU + memory_mb/1024*w.Memory are eligible.
func ResourceUsagePolicy(w Weights) Policy {
	return MinimumPolicy{PolicyName: PolicyResourceUsage, Provider: ResourceUsageProvider{Weights: w}}
}

// NonePolicy returns the none policy: no node is ever eligible, and the loop
// writes no address at all (no claims, no takeovers, no releases).
func NonePolicy() Policy { return nonePolicy{} }

// ParsePolicy returns the policy named name, case-insensitively and ignoring
// surrounding spaces: "deployment_count" (also for ""), "resource_usage"
// (scored with w) or "none". Any other name is a [*ConfigError] named
// "policy" wrapping [ErrUnknownPolicy]; there is no fallback.
func ParsePolicy(name string, w Weights) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", PolicyDeploymentCount:
		return DeploymentCountPolicy(), nil
	case PolicyResourceUsage:
		return ResourceUsagePolicy(w), nil
	case PolicyNone:
		return NonePolicy(), nil
	}
	return nil, &ConfigError{Name: "policy", Value: name, Err: fmt.Errorf("%w: want %s, %s or %s", ErrUnknownPolicy, PolicyDeploymentCount, PolicyResourceUsage, PolicyNone)}
}

// IsNone reports whether p disables claims (nil is not none: it means the
// default policy).
func IsNone(p Policy) bool { return p != nil && p.Name() == PolicyNone }

// DefaultInterval is the loop's default period ([Config.Interval]).
const DefaultInterval = 5 * time.Second
