package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/internal/nodeunit/proc"
)

// procRunner is the claim.Runner of the binary: local processes through
// proc.Runner.
type procRunner struct{ r *proc.Runner }

var _ claim.Runner = procRunner{}

// Running returns the supervised ids.
func (p procRunner) Running() []string { return p.r.Running() }

// Start starts d's command with its args and env. An untrusted command or
// a deployment without a command is a permanent refusal (claim.ErrRefused).
func (p procRunner) Start(ctx context.Context, d claim.Deployment) error {
	err := p.r.Start(ctx, specOf(d))
	if errors.Is(err, proc.ErrUntrusted) || errors.Is(err, proc.ErrInvalidSpec) {
		return fmt.Errorf("%w: %w", claim.ErrRefused, err)
	}
	return err
}

// Stop stops the process of id.
func (p procRunner) Stop(ctx context.Context, id string) error { return p.r.Stop(ctx, id) }

// specOf turns a deployment into a process spec; env pairs are sorted by
// name so that an unchanged deployment gives an identical spec.
func specOf(d claim.Deployment) proc.Spec {
	env := make([]string, 0, len(d.Env))
	for k, v := range d.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return proc.Spec{ID: d.ID, Command: d.Command, Args: d.Args, Env: env}
}
