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
// proc.Runner. It is a claim.Admitter, so the loop claims only what the
// trust rule lets it run; refusals go to the board, when there is one.
type procRunner struct {
	r *proc.Runner
	b *board // nil: refusals are not reported
}

var (
	_ claim.Runner   = procRunner{}
	_ claim.Admitter = procRunner{}
)

// Running returns the supervised ids.
func (p procRunner) Running() []string { return p.r.Running() }

// Admit reports whether Start would run d: an untrusted command or a
// deployment without a command is a refusal (claim.ErrRefused).
func (p procRunner) Admit(d claim.Deployment) error {
	return p.refusal(d, p.r.Check(specOf(d)))
}

// Start starts d's command with its args and env. An untrusted command or
// a deployment without a command is a permanent refusal (claim.ErrRefused).
func (p procRunner) Start(ctx context.Context, d claim.Deployment) error {
	return p.refusal(d, p.r.Start(ctx, specOf(d)))
}

// refusal marks a refusal of d with claim.ErrRefused and reports it.
func (p procRunner) refusal(d claim.Deployment, err error) error {
	if !errors.Is(err, proc.ErrUntrusted) && !errors.Is(err, proc.ErrInvalidSpec) {
		return err
	}
	if p.b != nil {
		p.b.refuse(d.ID, refusalReason(err))
	}
	return fmt.Errorf("%w: %w", claim.ErrRefused, err)
}

// refusalReason says why a deployment is refused, in the terms of the
// node-unit's settings.
func refusalReason(err error) string {
	var ue *proc.UntrustedError
	switch {
	case errors.As(err, &ue) && ue.Pattern == "":
		return fmt.Sprintf("command %q refused: NODE_UNIT_TRUSTED_COMMAND_REGEXP is unset", ue.Command)
	case errors.As(err, &ue):
		return fmt.Sprintf("command %q does not match NODE_UNIT_TRUSTED_COMMAND_REGEXP %q", ue.Command, ue.Pattern)
	case errors.Is(err, proc.ErrInvalidSpec):
		return "no command"
	}
	return err.Error()
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
