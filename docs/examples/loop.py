import engine

pack = engine.load_pack("./my-pack")
output = open("out.txt", encoding="utf-8").read()
vars = {"question": "Q1"}
verdict = pack.evaluate("ANSWER", output, nonce="4F2C9A", vars=vars)
decision = pack.decide(verdict, output=output, attempt=1, nonce="4F2C9A")
print(verdict.status, verdict.failure_type, decision.action, decision.attempts_left)
if decision.action == "REPAIR":
    prompt = pack.render(verdict, decision, output=output, nonce="4F2C9A", vars=vars)
    print(prompt.splitlines()[0])
