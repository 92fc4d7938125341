package redisstore

import (
	"errors"

	"github.com/redis/rueidis"
)

func isNil(err error) bool {
	if err == nil {
		return false
	}
	var re *rueidis.RedisError
	return rueidis.IsRedisNil(err) || (errors.As(err, &re) && re.IsNil())
}
