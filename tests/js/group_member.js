// One kafkajs consumer-group member in its own process, the Node twin of
// tests/broker/group_member.py (same arguments, same files):
//   node group_member.js BOOTSTRAP GROUP TOPIC WORKDIR NAME
// Each record is committed synchronously and only then appended as
// "partition offset value" to WORKDIR/NAME.out; the assignment is written to
// WORKDIR/NAME.json (and appended to NAME.history) whenever it changes.
// SIGTERM disconnects (LeaveGroup); SIGKILL is a crash. GROUP_SESSION_MS from the
// environment sets the session timeout (default 2000, as the Python members).
'use strict'

const fs = require('fs')
const path = require('path')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, groupId, topic, workdir, name] = process.argv.slice(2)
const sessionTimeout = parseInt(process.env.GROUP_SESSION_MS || '2000', 10)
const out = fs.openSync(path.join(workdir, `${name}.out`), 'a')
const status = path.join(workdir, `${name}.json`)
let last = null

function report (partitions) {
  const sorted = [...partitions].sort((a, b) => a - b)
  const text = JSON.stringify(sorted)
  if (text === last) return
  last = text
  fs.appendFileSync(path.join(workdir, `${name}.history`), text + '\n')
  fs.writeFileSync(status + '.tmp', JSON.stringify({ assigned: sorted, pid: process.pid }))
  fs.renameSync(status + '.tmp', status)
}

async function main () {
  const kafka = new Kafka({ clientId: name, brokers: [bootstrap], logLevel: logLevel.NOTHING })
  const consumer = kafka.consumer({
    groupId,
    sessionTimeout,
    rebalanceTimeout: 10000,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 50,
    retry: { retries: 100, initialRetryTime: 50, maxRetryTime: 500 },
  })
  consumer.on(consumer.events.GROUP_JOIN, e => report(e.payload.memberAssignment[topic] || []))
  process.on('SIGTERM', async () => {
    await consumer.disconnect()
    process.exit(0)
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      // A failed commit throws: kafkajs rejoins, and the partition's next owner gets the
      // record again from the last acknowledged commit.
      await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }])
      fs.writeSync(out, `${partition} ${message.offset} ${message.value.toString()}\n`)
    },
  })
}

main().catch(err => {
  process.stderr.write(`${err.stack || err}\n`)
  process.exit(1)
})
