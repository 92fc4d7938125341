package scheduler

import (
	"context"
	"errors"
)

// Adoption: the inboxes of dead instances.

// adoptDead takes over the inboxes of instances whose presence expired:
// their messages are routed on (a node or session that reconnected
// elsewhere gets them; a job_assign for a node gone fails over), so that
// nothing sent to a dead instance is lost.
func (d *Dispatcher) adoptDead(ctx context.Context) {
	ids, err := d.st.Presence.Instances(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("scheduler: list instances", "err", err)
		}
		return
	}
	for _, id := range ids {
		if id == d.id {
			continue
		}
		alive, err := d.st.Presence.Alive(ctx, id)
		if err != nil || alive {
			continue
		}
		ok, err := d.st.Presence.Adopt(ctx, id, d.id, d.cfg.OwnerTTL)
		if err != nil || !ok {
			continue
		}
		d.log.Info("scheduler: adopting the inbox of a dead instance", "instance_id", id)
		if err := d.drain(ctx, id); err != nil {
			if ctx.Err() == nil {
				d.log.Warn("scheduler: adopt inbox", "instance_id", id, "err", err)
			}
			continue
		}
		d.log.Info("scheduler: adopted the inbox of a dead instance", "instance_id", id)
		if d.hooks.Adopted != nil {
			d.hooks.Adopted(id)
		}
	}
}

// drain handles every entry of a dead instance's inbox, pending or new,
// and forgets the instance once its inbox is empty.
func (d *Dispatcher) drain(ctx context.Context, dead string) error {
	in := d.st.Inbox(dead)
	if err := in.EnsureGroup(ctx); err != nil {
		return err
	}
	consumer := d.id + "/adopt"
	count := d.cfg.Inbox.Count
	for ctx.Err() == nil {
		msgs, _, err := in.Reclaim(ctx, consumer, 0, count)
		if err != nil {
			return err
		}
		fresh, err := in.Read(ctx, consumer, count, 0)
		if err != nil {
			return err
		}
		msgs = append(msgs, fresh...)
		if len(msgs) == 0 {
			break
		}
		var done []string
		for _, m := range msgs {
			m.Redelivered = true
			err := d.handle(ctx, m)
			switch {
			case err == nil:
				done = append(done, m.ID)
			case errors.Is(err, ErrMalformed) && !d.cfg.Inbox.NoDeadLetters:
				if dl, ok, derr := in.DeadLetter(ctx, consumer, m.ID, 0, ReasonMalformed+": "+err.Error()); derr == nil && ok && d.hooks.DLQMoved != nil {
					d.hooks.DLQMoved(dl)
				}
			case errors.Is(err, ErrMalformed):
				done = append(done, m.ID)
			default:
				return err
			}
		}
		if err := in.Ack(ctx, done...); err != nil {
			return err
		}
	}
	n, err := in.Len(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		return d.st.Presence.Forget(ctx, dead)
	}
	return nil
}
