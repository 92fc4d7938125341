package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/rueidis"
)

// luaScript is a rueidis.Lua that also sends several calls in one
// pipeline of EVALSHA without loading the script first: rueidis's
// ExecMulti sends SCRIPT LOAD to every server before each pipeline, which
// the server counts as work (and hashes the script for) at every sweep.
type luaScript struct {
	*rueidis.Lua
	sha string
}

func newLuaScript(src string) luaScript {
	h := sha1.Sum([]byte(src))
	return luaScript{Lua: rueidis.NewLuaScript(src), sha: hex.EncodeToString(h[:])}
}

// execMulti runs the calls in one pipeline of EVALSHA; a call that finds
// the script missing (NOSCRIPT: a server restarted, or never had it) is
// run again by Exec, which sends the script with it.
func (s luaScript) execMulti(ctx context.Context, c rueidis.Client, execs ...rueidis.LuaExec) []rueidis.RedisResult {
	if len(execs) == 0 {
		return nil
	}
	cmds := make(rueidis.Commands, len(execs))
	for i, e := range execs {
		cmds[i] = c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(e.Keys))).Key(e.Keys...).Arg(e.Args...).Build()
	}
	res := c.DoMulti(ctx, cmds...)
	for i, r := range res {
		if re, ok := rueidis.IsRedisErr(r.Error()); ok && re.IsNoScript() {
			res[i] = s.Exec(ctx, c, execs[i].Keys, execs[i].Args)
		}
	}
	return res
}
