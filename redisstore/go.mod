module github.com/ratedb/ratedb/redisstore

go 1.26.8

replace github.com/ratedb/ratedb => ..
