// kafkajs driver for Chronolog's tests: reads one JSON job on stdin, runs its steps
// in order with one kafkajs client, and prints one JSON result (an array, one entry
// per step) on stdout. Bytes travel as base64 so that any payload survives JSON.
'use strict'

const fs = require('fs')
const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const b64 = buf => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = s => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))

async function produce (kafka, step) {
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  try {
    // One send per partition keeps each partition's records in one batch, in order.
    const byPartition = new Map()
    for (const m of step.messages) {
      if (!byPartition.has(m.partition)) byPartition.set(m.partition, [])
      byPartition.get(m.partition).push(m)
    }
    const offsets = []
    for (const [partition, msgs] of byPartition) {
      const meta = await producer.send({
        topic: step.topic,
        acks: step.acks === undefined ? -1 : step.acks,
        compression: step.gzip ? CompressionTypes.GZIP : CompressionTypes.None,
        messages: msgs.map(m => ({
          partition,
          key: unb64(m.key),
          value: unb64(m.value),
          timestamp: String(m.timestamp),
          headers: Object.fromEntries((m.headers || []).map(([k, v]) => [k, unb64(v)])),
        })),
      })
      const base = parseInt(meta[0].baseOffset, 10)
      msgs.forEach((m, i) => offsets.push({ partition, offset: base + i, error: meta[0].errorCode }))
    }
    return offsets
  } finally {
    await producer.disconnect()
  }
}

// One transactional producer running `step.transactions` in order: each sends its
// messages (one send per partition), optionally commits consumer offsets inside the
// transaction (sendOffsets), then commits or aborts. With `step.fencedBy`, a second
// producer with the same transactional id starts while the last transaction is open,
// and the first one's commit must fail: its error type is returned.
async function transactions (kafka, step) {
  const make = () => kafka.producer({
    transactionalId: step.transactionalId, idempotent: true, maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
  })
  const producer = make()
  await producer.connect()
  const out = []
  try {
    for (const [i, t] of step.transactions.entries()) {
      const txn = await producer.transaction()
      const partitions = [...new Set(t.messages.map(m => m.partition))]
      for (const partition of partitions) {
        await txn.send({
          topic: step.topic,
          messages: t.messages.filter(m => m.partition === partition).map(m => ({
            partition, value: unb64(m.value), timestamp: String(m.timestamp),
          })),
        })
      }
      if (t.offsets) {
        await txn.sendOffsets({
          consumerGroupId: t.offsets.groupId,
          topics: [{ topic: t.offsets.topic, partitions: t.offsets.partitions.map(
            p => ({ partition: p.partition, offset: String(p.offset) })) }],
        })
      }
      if (step.fencedBy && i === step.transactions.length - 1) {
        const zombieKiller = make()
        await zombieKiller.connect()
        await zombieKiller.transaction().then(x => x.abort()).catch(() => {})
        await zombieKiller.disconnect()
        try {
          await txn.commit()
          out.push({ fenced: null })
        } catch (err) {
          out.push({ fenced: err.type || err.name })
        }
      } else if (t.commit) {
        await txn.commit()
        out.push({ committed: true })
      } else {
        await txn.abort()
        out.push({ committed: false })
      }
    }
  } finally {
    await producer.disconnect().catch(() => {})
  }
  return out
}

// `members` consumers of one group (default 1), started together so that they join
// one generation; each message is tagged with the member that received it.
async function consume (kafka, step) {
  const consumers = []
  for (let i = 0; i < (step.members || 1); i++) {
    const consumer = kafka.consumer({
      groupId: step.groupId,
      sessionTimeout: step.sessionTimeout || 10000,
      rebalanceTimeout: step.rebalanceTimeout || 10000,
      heartbeatInterval: 500,
      maxWaitTimeInMs: 100,
      readUncommitted: step.readUncommitted === true,
    })
    await consumer.connect()
    await consumer.subscribe({ topics: [step.topic], fromBeginning: step.fromBeginning !== false })
    consumers.push(consumer)
  }
  const got = []
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`consumed ${got.length} of ${step.count}`)),
        step.timeoutMs || 30000)
      consumers.forEach((consumer, member) => consumer.run({
        autoCommit: step.commit === true,
        eachMessage: async ({ partition, message }) => {
          got.push({
            member,
            partition,
            offset: parseInt(message.offset, 10),
            key: b64(message.key),
            value: b64(message.value),
            timestamp: parseInt(message.timestamp, 10),
            headers: Object.entries(message.headers || {}).map(([k, v]) => [k, b64(v)]),
          })
          if (got.length >= step.count) { clearTimeout(timer); resolve() }
        },
      }).catch(reject))
    })
    if (step.commit === true) {
      for (const [member, consumer] of consumers.entries()) {
        const offsets = lastOffsets(step.topic, got.filter(m => m.member === member))
        if (offsets.length) await consumer.commitOffsets(offsets)
      }
    }
  } finally {
    for (const consumer of consumers) await consumer.disconnect()
  }
  return got
}

function lastOffsets (topic, got) {
  const next = new Map()
  for (const m of got) next.set(m.partition, Math.max(next.get(m.partition) || 0, m.offset + 1))
  return [...next].map(([partition, offset]) => ({ topic, partition, offset: String(offset) }))
}

async function adminStep (admin, step) {
  switch (step.op) {
    case 'createTopics':
      // No numPartitions / replicationFactor: kafkajs sends -1 for both (broker defaults).
      return admin.createTopics({ topics: step.topics.map(t => ({ topic: t })), waitForLeaders: true })
    case 'listTopics':
      return (await admin.listTopics()).sort()
    case 'fetchTopicOffsets':
      return admin.fetchTopicOffsets(step.topic)
    case 'offsetsByTime': {
      const out = []
      for (const ts of step.timestamps) {
        const answer = await admin.fetchTopicOffsetsByTimestamp(step.topic, ts)
        out.push(answer.map(p => ({ partition: p.partition, offset: parseInt(p.offset, 10) })))
      }
      return out
    }
    case 'listGroups':
      return (await admin.listGroups()).groups
    case 'describeGroups':
      return (await admin.describeGroups(step.groups)).groups.map(g => ({
        groupId: g.groupId,
        state: g.state,
        protocolType: g.protocolType,
        members: g.members.map(m => ({ memberId: m.memberId, clientId: m.clientId })),
      }))
    case 'fetchOffsets':
      return admin.fetchOffsets({ groupId: step.groupId, topics: [step.topic] })
    default:
      throw new Error(`unknown admin op ${step.op}`)
  }
}

async function main () {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  const job = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  // Optional security: job.sasl = { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512',
  // username, password }; job.caFile = the PEM CA that makes the connection TLS.
  const kafka = new Kafka({
    clientId: job.clientId || 'chronolog-kafkajs',
    brokers: job.brokers,
    logLevel: logLevel.ERROR,
    retry: { retries: job.retries === undefined ? 3 : job.retries },
    ...(job.sasl ? { sasl: job.sasl } : {}),
    ...(job.caFile ? { ssl: { ca: [fs.readFileSync(job.caFile, 'utf8')] } } : {}),
  })
  const results = []
  const admin = kafka.admin()
  await admin.connect()
  try {
    for (const step of job.steps) {
      if (step.op === 'produce') results.push(await produce(kafka, step))
      else if (step.op === 'consume') results.push(await consume(kafka, step))
      else if (step.op === 'transactions') results.push(await transactions(kafka, step))
      else results.push(await adminStep(admin, step))
    }
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(JSON.stringify(results))
}

main().catch(err => {
  process.stderr.write(`${err.stack || err}\n`)
  process.exit(1)
})
