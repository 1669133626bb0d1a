-- constants (-D): {"k0": "60s", "k1": "expire-promotions", "k2": "200", "k3": "Expired", "k4": "2", "k5": "1", "k6": "21", "k7": "pin.promotion.purchase-changed.v1", "k8": "pin.promotion.purchase-changed", "k9": "{\"PurchaseId\":\"4e958111-a3ca-66a5-b1ff-d9a9c6cba421\",\"TenantId\":\"40a6d137-32a4-d", "k10": "{\"correlation-id\":\"d59d3a0c-1956-4160-bac0-b9ae053964ff\"}", "k11": "9", "k12": "{\"PurchaseId\":\"01f1919d-eae6-c936-00e6-267907a67392\",\"TenantId\":\"373b24d7-6918-f", "k13": "22", "k14": "{\"PurchaseId\":\"3410102e-d1d4-8640-c937-449606541ad3\",\"TenantId\":\"b3a416bd-2911-9", "k15": "60", "k16": "{\"PurchaseId\":\"a442b2c1-60a5-399e-454d-e590982aeb5a\",\"TenantId\":\"d739a823-41f3-4", "k17": "7", "k18": "{\"PurchaseId\":\"e5f4448e-0055-1449-2102-887233f1dcd8\",\"TenantId\":\"8142357b-cae0-1", "k19": "30", "k20": "{\"PurchaseId\":\"c1258ad8-3def-e515-ce48-fd802e69e3e2\",\"TenantId\":\"cf5b5038-9076-2", "k21": "20", "k22": "{\"PurchaseId\":\"a4b37630-4712-c7d1-6ebf-62773f077c1e\",\"TenantId\":\"edab81fe-2ad1-8", "k23": "{\"PurchaseId\":\"b2df3120-545e-ef40-b099-5f62a6e6c0e1\",\"TenantId\":\"85ba4316-ef49-6", "k24": "8", "k25": "{\"PurchaseId\":\"5ceafeb8-eec1-c137-24ac-1a5d546418db\",\"TenantId\":\"da3259f9-6164-0", "k26": "18", "k27": "{\"PurchaseId\":\"167a5826-e435-2244-3c77-debf9b1f000d\",\"TenantId\":\"b51d4fa8-b51d-3", "k28": "28", "k29": "{\"PurchaseId\":\"b52c4eeb-5c83-9f01-d754-6165cf7cc00b\",\"TenantId\":\"67397084-9154-1", "k30": "27", "k31": "{\"PurchaseId\":\"f97942b7-bef0-b2e1-4d19-139437500b8f\",\"TenantId\":\"5356c313-c6f6-0", "k32": "{\"PurchaseId\":\"d9f8822a-8aaa-eff8-2300-c6ca09dae984\",\"TenantId\":\"d51d5411-cc8e-e", "k33": "47", "k34": "{\"PurchaseId\":\"2541fec3-04b6-3fc7-d745-20deea51535c\",\"TenantId\":\"72542497-b988-d", "k35": "{\"PurchaseId\":\"81dc14b6-287c-771f-8bc8-b98b0d47b1ec\",\"TenantId\":\"49921e0f-c134-3", "k36": "34", "k37": "{\"PurchaseId\":\"2ca4d449-454e-0623-c6a8-b2c19d11c5fe\",\"TenantId\":\"95477450-3c50-a", "k38": "46", "k39": "{\"PurchaseId\":\"1577ebdc-a0c2-1333-e713-422d5c8a50f7\",\"TenantId\":\"d230a6ed-c7c6-4", "k40": "49", "k41": "{\"PurchaseId\":\"d3d21e0e-0237-a0f0-5c36-7abfeed75476\",\"TenantId\":\"a63904bf-0fda-6", "k42": "6", "k43": "{\"PurchaseId\":\"86cb807c-f6c3-db92-4ffe-255e75c657dd\",\"TenantId\":\"0ec75ff4-d279-6", "k44": "{\"PurchaseId\":\"ed883042-84ea-5fd4-8f49-02335a19b952\",\"TenantId\":\"a3410e8b-1b79-0", "k45": "{\"PurchaseId\":\"d7bed6ff-65c1-b27f-29b8-a9a22a4fd422\",\"TenantId\":\"40a6d137-32a4-d", "k46": "55", "k47": "{\"PurchaseId\":\"8e881e5c-5851-d426-76b4-4568bf782036\",\"TenantId\":\"373b24d7-6918-f", "k48": "{\"PurchaseId\":\"25bcea95-e11a-4389-c083-7b90ca09fd00\",\"TenantId\":\"b3a416bd-2911-9", "k49": "{\"PurchaseId\":\"5315779c-fc1b-aa22-8c18-7942b3838c65\",\"TenantId\":\"d739a823-41f3-4", "k50": "43", "k51": "{\"PurchaseId\":\"374cde41-c5e7-71cd-ca63-910ced584602\",\"TenantId\":\"8142357b-cae0-1", "k52": "33", "k53": "{\"PurchaseId\":\"d1640077-4f20-8ef6-0bbd-6a7bb6c8b896\",\"TenantId\":\"cf5b5038-9076-2", "k54": "53", "k55": "{\"PurchaseId\":\"1661424d-6aac-a0c6-802b-b13c717eff29\",\"TenantId\":\"edab81fe-2ad1-8", "k56": "48", "k57": "{\"PurchaseId\":\"f0514a96-611c-c92e-6476-abe55540cb7d\",\"TenantId\":\"85ba4316-ef49-6", "k58": "{\"PurchaseId\":\"07b25185-0805-1902-c6a3-9cc17ec0ceba\",\"TenantId\":\"da3259f9-6164-0", "k59": "10", "k60": "{\"PurchaseId\":\"b885b8e8-5de5-38b4-3968-707b85ba5872\",\"TenantId\":\"b51d4fa8-b51d-3", "k61": "54", "k62": "{\"PurchaseId\":\"611f7307-d696-9001-50f7-a611803424ce\",\"TenantId\":\"67397084-9154-1", "k63": "{\"PurchaseId\":\"437b79fe-b70a-a810-3d1b-c02f2f0c4e25\",\"TenantId\":\"5356c313-c6f6-0", "k64": "57", "k65": "{\"PurchaseId\":\"2443eb76-4e65-ce26-4bd7-ed727321ff7b\",\"TenantId\":\"d51d5411-cc8e-e", "k66": "{\"PurchaseId\":\"34e96cf7-99ea-ae89-4c91-876a212ffbb1\",\"TenantId\":\"72542497-b988-d", "k67": "{\"PurchaseId\":\"a9dfa4cc-d0c4-4a34-546f-fed455f333f3\",\"TenantId\":\"49921e0f-c134-3", "k68": "58", "k69": "{\"PurchaseId\":\"bfa52819-d453-cf91-b27b-2b3cbe67a103\",\"TenantId\":\"95477450-3c50-a", "k70": "4", "k71": "{\"PurchaseId\":\"065ef13c-4ec7-eef6-a225-c948a378f17f\",\"TenantId\":\"d230a6ed-c7c6-4", "k72": "50", "k73": "{\"PurchaseId\":\"d41fe5d6-536b-5b43-995c-4b76df4c16a3\",\"TenantId\":\"a63904bf-0fda-6", "k74": "38", "k75": "{\"PurchaseId\":\"0e9d21a8-c1f0-3275-6158-7389c26e9e03\",\"TenantId\":\"0ec75ff4-d279-6", "k76": "26", "k77": "{\"PurchaseId\":\"a519ea1a-d698-1153-301a-f24903860ce1\",\"TenantId\":\"a3410e8b-1b79-0", "k78": "39", "k79": "{\"PurchaseId\":\"ab810fe9-cfc5-4bd7-fe0c-879f3defb112\",\"TenantId\":\"40a6d137-32a4-d", "k80": "{\"PurchaseId\":\"755ccc71-ef89-8cd6-ecc2-ffecb88906c9\",\"TenantId\":\"373b24d7-6918-f", "k81": "{\"PurchaseId\":\"5bdd0c55-78f5-c3b3-ae58-a1256ac980e7\",\"TenantId\":\"b3a416bd-2911-9", "k82": "32", "k83": "{\"PurchaseId\":\"8c7181f7-34da-e6d0-5546-b40f17e563e2\",\"TenantId\":\"d739a823-41f3-4", "k84": "{\"PurchaseId\":\"67bbedaa-6c70-b6ab-6892-27a29d4e1f18\",\"TenantId\":\"8142357b-cae0-1", "k85": "0", "k86": "{\"PurchaseId\":\"2112697d-6c0d-8aeb-9642-c08980312907\",\"TenantId\":\"cf5b5038-9076-2", "k87": "{\"PurchaseId\":\"82e1134e-af2b-ce96-d581-eca7c16df939\",\"TenantId\":\"edab81fe-2ad1-8", "k88": "{\"PurchaseId\":\"9b15096c-b6ea-b15a-bd53-15ba0fa126f6\",\"TenantId\":\"85ba4316-ef49-6", "k89": "{\"PurchaseId\":\"d24fa69b-9cf6-a3c7-63f7-192436143c5a\",\"TenantId\":\"da3259f9-6164-0", "k90": "62", "k91": "{\"PurchaseId\":\"3c4b5098-6383-15a3-1ee9-4001709fb9ee\",\"TenantId\":\"b51d4fa8-b51d-3", "k92": "36", "k93": "{\"PurchaseId\":\"7a5b3f91-d90c-136c-6224-a78927866a5f\",\"TenantId\":\"67397084-9154-1", "k94": "{\"PurchaseId\":\"22be1452-3a48-e2e4-7540-a0928cf8b623\",\"TenantId\":\"5356c313-c6f6-0", "k95": "35", "k96": "{\"PurchaseId\":\"59168539-3bb0-28ac-a23f-4ee1426a5ed8\",\"TenantId\":\"d51d5411-cc8e-e", "k97": "{\"PurchaseId\":\"9fba49f1-2c6c-bf87-1d9f-d3f6ea84a98d\",\"TenantId\":\"72542497-b988-d", "k98": "19", "k99": "{\"PurchaseId\":\"0ecce9da-83a7-29be-750d-2066c512b37d\",\"TenantId\":\"49921e0f-c134-3", "k100": "{\"PurchaseId\":\"e85d2262-4141-3ada-f691-9601f83a94e7\",\"TenantId\":\"95477450-3c50-a", "k101": "56", "k102": "{\"PurchaseId\":\"03f10491-1fec-a9d4-7877-6d76f4a9d38b\",\"TenantId\":\"d230a6ed-c7c6-4", "k103": "5", "k104": "{\"PurchaseId\":\"1275b019-5871-cb37-8996-b7091f879522\",\"TenantId\":\"a63904bf-0fda-6", "k105": "{\"PurchaseId\":\"19363fc4-7a97-90dc-ffaf-1abebbeec653\",\"TenantId\":\"0ec75ff4-d279-6", "k106": "{\"PurchaseId\":\"5c546874-7c04-6ff0-54ae-3420b72da8b7\",\"TenantId\":\"a3410e8b-1b79-0", "k107": "{\"PurchaseId\":\"20b6f591-4d25-836e-bc86-4af6577f826e\",\"TenantId\":\"40a6d137-32a4-d", "k108": "{\"PurchaseId\":\"db26aadf-d04c-44a1-72fb-c590b897308f\",\"TenantId\":\"373b24d7-6918-f", "k109": "{\"PurchaseId\":\"2ed40f78-db9d-1ae9-75d0-8b9fb5715a4b\",\"TenantId\":\"b3a416bd-2911-9", "k110": "{\"PurchaseId\":\"a1cd11ae-1655-ee91-113d-1354428339f2\",\"TenantId\":\"d739a823-41f3-4", "k111": "{\"PurchaseId\":\"54627be4-ebaf-c6ee-2bdd-7704b91f0ffc\",\"TenantId\":\"8142357b-cae0-1", "k112": "{\"PurchaseId\":\"ad3d234c-6c49-765d-7f6b-138498593fe1\",\"TenantId\":\"cf5b5038-9076-2", "k113": "29", "k114": "{\"PurchaseId\":\"0a3c4f45-cce6-5e75-8e1c-729e6042ece7\",\"TenantId\":\"edab81fe-2ad1-8", "k115": "{\"PurchaseId\":\"695e9f39-92be-07c4-0c81-472ee5abab09\",\"TenantId\":\"85ba4316-ef49-6", "k116": "61", "k117": "{\"PurchaseId\":\"520cfb42-5e40-6937-e5f0-c4f742319153\",\"TenantId\":\"da3259f9-6164-0", "k118": "37", "k119": "{\"PurchaseId\":\"56c10397-f579-9708-8580-7c76cfcf25f0\",\"TenantId\":\"b51d4fa8-b51d-3", "k120": "17", "k121": "{\"PurchaseId\":\"12ca41b9-0e3a-6c66-3c72-12b4c471f55c\",\"TenantId\":\"67397084-9154-1", "k122": "{\"PurchaseId\":\"f4d7a4ae-db99-06df-8c65-2798dd363f81\",\"TenantId\":\"5356c313-c6f6-0", "k123": "23", "k124": "{\"PurchaseId\":\"f44206b6-2264-ef4a-31d6-f2858d46213a\",\"TenantId\":\"d51d5411-cc8e-e", "k125": "{\"PurchaseId\":\"20ea0c64-073a-545f-3155-40ebabca2dfe\",\"TenantId\":\"72542497-b988-d", "k126": "59", "k127": "{\"PurchaseId\":\"7f0ed00c-5229-03f0-241e-cbb0ec9074de\",\"TenantId\":\"49921e0f-c134-3", "k128": "{\"PurchaseId\":\"14a265d1-1c92-cc69-3240-6ff7b1ddb93f\",\"TenantId\":\"95477450-3c50-a", "k129": "51", "k130": "{\"PurchaseId\":\"1016b8a4-b509-927f-75e5-68b7471df3df\",\"TenantId\":\"d230a6ed-c7c6-4", "k131": "{\"PurchaseId\":\"71cc759a-6d2c-8ef8-246d-07818796fc87\",\"TenantId\":\"a63904bf-0fda-6", "k132": "{\"PurchaseId\":\"d54e05da-80ed-e7b2-ac66-2c460ff0fd9a\",\"TenantId\":\"0ec75ff4-d279-6", "k133": "{\"PurchaseId\":\"00dca64f-fe65-b4fc-0bfb-a31ef8f8f4c2\",\"TenantId\":\"a3410e8b-1b79-0", "k134": "{\"PurchaseId\":\"34cc107d-dfdb-1058-a694-04422fe9935a\",\"TenantId\":\"40a6d137-32a4-d", "k135": "63", "k136": "{\"PurchaseId\":\"a57c4867-7958-4038-6a98-daf0af47cea7\",\"TenantId\":\"373b24d7-6918-f", "k137": "{\"PurchaseId\":\"a4d92a98-d903-8799-886b-dc394b1f7bdf\",\"TenantId\":\"b3a416bd-2911-9", "k138": "40", "k139": "{\"PurchaseId\":\"0c804a15-f1c2-7359-b9e1-e221a548766b\",\"TenantId\":\"d739a823-41f3-4", "k140": "{\"PurchaseId\":\"aa4e2492-4d01-82cc-3f9c-c1f37d15cae9\",\"TenantId\":\"8142357b-cae0-1", "k141": "{\"PurchaseId\":\"e0c12903-9dde-f9cb-b808-b809c908926e\",\"TenantId\":\"cf5b5038-9076-2", "k142": "{\"PurchaseId\":\"8aec7817-e6c3-365c-3508-69c8f51042fe\",\"TenantId\":\"edab81fe-2ad1-8", "k143": "{\"PurchaseId\":\"71aabb38-f098-3854-edd0-c611ebb7ae08\",\"TenantId\":\"85ba4316-ef49-6", "k144": "{\"PurchaseId\":\"a72ed9b1-c7af-d967-286d-ac7791ceed87\",\"TenantId\":\"da3259f9-6164-0", "k145": "24", "k146": "{\"PurchaseId\":\"9d449e97-b71e-e5a7-8bf5-dde3632062bd\",\"TenantId\":\"b51d4fa8-b51d-3", "k147": "52", "k148": "{\"PurchaseId\":\"32297d13-5ced-4f6d-79c1-edc22b111ae6\",\"TenantId\":\"67397084-9154-1", "k149": "{\"PurchaseId\":\"5346012e-3f7e-7761-f7e4-cfd33ed593ff\",\"TenantId\":\"5356c313-c6f6-0", "k150": "{\"PurchaseId\":\"8d8121bb-6b22-12dc-ee50-6e615b48b1f3\",\"TenantId\":\"d51d5411-cc8e-e", "k151": "44", "k152": "{\"PurchaseId\":\"c3252432-415f-745b-8e0c-0e8f63db3539\",\"TenantId\":\"72542497-b988-d", "k153": "{\"PurchaseId\":\"741054b8-9621-fa41-1ea8-b25e87922dea\",\"TenantId\":\"49921e0f-c134-3", "k154": "25", "k155": "{\"PurchaseId\":\"4798979f-592d-2578-7d4c-e70710cf1c40\",\"TenantId\":\"95477450-3c50-a", "k156": "{\"PurchaseId\":\"3496de1c-3c9d-8e39-e693-d3fc4ad0df0d\",\"TenantId\":\"d230a6ed-c7c6-4", "k157": "{\"PurchaseId\":\"32956bed-a5e7-b250-a0d6-20ff3ee8195e\",\"TenantId\":\"a63904bf-0fda-6", "k158": "{\"PurchaseId\":\"65285604-6512-5f8b-a18a-3840a626b58a\",\"TenantId\":\"0ec75ff4-d279-6", "k159": "{\"PurchaseId\":\"f3639b38-22d0-1108-76e0-22941a99ffc4\",\"TenantId\":\"a3410e8b-1b79-0", "k160": "{\"PurchaseId\":\"09f49d5a-ad13-955c-5a9d-b14cce2f6df6\",\"TenantId\":\"40a6d137-32a4-d", "k161": "{\"PurchaseId\":\"63b7bff2-4c7c-3fd4-c4ee-a17c38e46320\",\"TenantId\":\"373b24d7-6918-f", "k162": "31", "k163": "{\"PurchaseId\":\"3e7b3a74-59d2-4c3c-dedb-65249208baca\",\"TenantId\":\"b3a416bd-2911-9", "k164": "{\"PurchaseId\":\"504fccec-cdc9-07a9-5487-cba3733ca4fb\",\"TenantId\":\"d739a823-41f3-4", "k165": "{\"PurchaseId\":\"9d9b2b36-a778-2cbf-098b-1c8bf78363c6\",\"TenantId\":\"8142357b-cae0-1", "k166": "{\"PurchaseId\":\"50bdf158-9858-e045-166b-29c5a739a431\",\"TenantId\":\"cf5b5038-9076-2", "k167": "{\"PurchaseId\":\"3e62fe4f-4577-00b1-800d-eb37c914d9b5\",\"TenantId\":\"edab81fe-2ad1-8", "k168": "{\"PurchaseId\":\"360a3d39-1e3f-e94f-fa18-070070ca2967\",\"TenantId\":\"85ba4316-ef49-6", "k169": "{\"PurchaseId\":\"ec6b9dee-219a-55a7-f5ec-fc54de4e4271\",\"TenantId\":\"da3259f9-6164-0", "k170": "{\"PurchaseId\":\"feec4bcb-ebf0-a4b2-98cd-89f603dc584c\",\"TenantId\":\"b51d4fa8-b51d-3", "k171": "{\"PurchaseId\":\"95e502c1-63ab-07ad-9d4f-d50ff54c618a\",\"TenantId\":\"67397084-9154-1", "k172": "{\"PurchaseId\":\"e1377ae4-41d6-0581-1899-2be19603dd85\",\"TenantId\":\"5356c313-c6f6-0", "k173": "{\"PurchaseId\":\"4c8e4de6-604e-def7-1973-fa7178d6d2e5\",\"TenantId\":\"d51d5411-cc8e-e", "k174": "{\"PurchaseId\":\"bb08e705-91a9-17c0-270f-eba4ae386b3d\",\"TenantId\":\"72542497-b988-d", "k175": "{\"PurchaseId\":\"5dccaaff-3572-771d-77f2-aa32d234e9b2\",\"TenantId\":\"49921e0f-c134-3", "k176": "{\"PurchaseId\":\"0001f9f8-8f88-00ef-faf9-5176fb3132ae\",\"TenantId\":\"95477450-3c50-a", "k177": "{\"PurchaseId\":\"a0899023-14a9-e5de-0a35-2e910d242f11\",\"TenantId\":\"d230a6ed-c7c6-4", "k178": "{\"PurchaseId\":\"66b9a029-245d-82bb-b312-4d555f701927\",\"TenantId\":\"a63904bf-0fda-6", "k179": "42", "k180": "{\"PurchaseId\":\"34c1d611-f257-ab7a-b427-ffc98cf37927\",\"TenantId\":\"0ec75ff4-d279-6", "k181": "{\"PurchaseId\":\"a0a452d4-4395-8c1d-2df7-75de3c693001\",\"TenantId\":\"a3410e8b-1b79-0", "k182": "{\"PurchaseId\":\"0d847ecb-768e-0e28-d9d8-d7aca37809e8\",\"TenantId\":\"40a6d137-32a4-d", "k183": "41", "k184": "{\"PurchaseId\":\"d7ab848c-4abf-7389-c990-974b29422f42\",\"TenantId\":\"373b24d7-6918-f", "k185": "{\"PurchaseId\":\"a795b9e6-3847-1b95-cd40-938334aa2164\",\"TenantId\":\"b3a416bd-2911-9", "k186": "{\"PurchaseId\":\"3ae49a8c-1335-4fc6-7d22-fd1bf359e073\",\"TenantId\":\"d739a823-41f3-4", "k187": "{\"PurchaseId\":\"6cf82f34-6362-e462-691c-d4df208c1409\",\"TenantId\":\"8142357b-cae0-1", "k188": "{\"PurchaseId\":\"04956773-b864-b87e-b542-e0475e76ff17\",\"TenantId\":\"cf5b5038-9076-2", "k189": "{\"PurchaseId\":\"4c2ea7cf-4ba3-a939-933b-9160d282da90\",\"TenantId\":\"edab81fe-2ad1-8", "k190": "{\"PurchaseId\":\"71e94b80-e9c0-8f8e-8981-b55e461ee072\",\"TenantId\":\"85ba4316-ef49-6", "k191": "{\"PurchaseId\":\"d4e3a37f-a9d2-b308-646d-ad778d7fb317\",\"TenantId\":\"da3259f9-6164-0", "k192": "{\"PurchaseId\":\"ab4adf29-9638-2e97-4700-85e3dce87d9e\",\"TenantId\":\"b51d4fa8-b51d-3", "k193": "{\"PurchaseId\":\"f250445f-f146-528d-a2d1-c1360cbfdad7\",\"TenantId\":\"67397084-9154-1", "k194": "{\"PurchaseId\":\"83e57c59-fb42-7790-c728-ec2520c80b45\",\"TenantId\":\"5356c313-c6f6-0", "k195": "{\"PurchaseId\":\"11fb8dcf-4e95-898d-ed2a-05186bee4501\",\"TenantId\":\"d51d5411-cc8e-e", "k196": "3", "k197": "{\"PurchaseId\":\"84abc3b8-b721-f5fb-2abf-c55528ae4b40\",\"TenantId\":\"72542497-b988-d", "k198": "{\"PurchaseId\":\"91befb22-f9ec-1018-6b40-a724d353794d\",\"TenantId\":\"49921e0f-c134-3", "k199": "{\"PurchaseId\":\"3ece65ee-9648-ae0c-fc2c-ca59b41f8332\",\"TenantId\":\"95477450-3c50-a", "k200": "{\"PurchaseId\":\"1604a8c2-6505-27da-a1b9-900e4981bcea\",\"TenantId\":\"d230a6ed-c7c6-4", "k201": "{\"PurchaseId\":\"f4561046-1603-cdf5-431e-ad808bbba7b7\",\"TenantId\":\"a63904bf-0fda-6", "k202": "{\"PurchaseId\":\"66dc67a2-e46d-d1eb-e13c-f8a78e594546\",\"TenantId\":\"0ec75ff4-d279-6", "k203": "{\"PurchaseId\":\"f0efa9fc-9014-24f1-a06c-c03362b73430\",\"TenantId\":\"a3410e8b-1b79-0", "k204": "{\"PurchaseId\":\"8237e086-d6ac-2366-b8b7-d1fb0c308d95\",\"TenantId\":\"40a6d137-32a4-d", "k205": "{\"PurchaseId\":\"434dcfe5-2b94-46ba-caf6-db130647db5f\",\"TenantId\":\"373b24d7-6918-f", "k206": "{\"PurchaseId\":\"5ada36e3-fdba-d989-7ea2-adde4b4e25f9\",\"TenantId\":\"b3a416bd-2911-9", "k207": "{\"PurchaseId\":\"8fac99c6-2a9a-f213-19fe-1c0e8f64af42\",\"TenantId\":\"d739a823-41f3-4", "k208": "{\"PurchaseId\":\"72395354-f116-a1e7-0207-e15776c20c8d\",\"TenantId\":\"8142357b-cae0-1", "k209": "{\"PurchaseId\":\"bcce4138-86ce-5167-8c22-0ef24ddbef0e\",\"TenantId\":\"cf5b5038-9076-2", "k210": "{\"PurchaseId\":\"391b3ff3-c7b5-ebde-ef21-65871df02195\",\"TenantId\":\"edab81fe-2ad1-8", "k211": "{\"PurchaseId\":\"d1e562d6-9aef-76a9-9778-49002c4613e5\",\"TenantId\":\"85ba4316-ef49-6", "k212": "{\"PurchaseId\":\"08c8e1aa-cd52-2ef3-be38-9f7d619428b6\",\"TenantId\":\"da3259f9-6164-0", "k213": "{\"PurchaseId\":\"dcae84bd-2f37-4d58-bea9-46fdaa33d526\",\"TenantId\":\"b51d4fa8-b51d-3", "k214": "{\"PurchaseId\":\"9a495b6b-f59e-9bde-f38f-a3dea15b0b53\",\"TenantId\":\"67397084-9154-1", "k215": "{\"PurchaseId\":\"0af27b30-9418-2f91-2d9e-1d402b3c2f80\",\"TenantId\":\"5356c313-c6f6-0", "k216": "16", "k217": "{\"PurchaseId\":\"d6fc0a2f-bc14-529c-a93e-46e59444c123\",\"TenantId\":\"d51d5411-cc8e-e", "k218": "{\"PurchaseId\":\"14c57bc6-ec54-7e56-89e1-bd904f9c8178\",\"TenantId\":\"72542497-b988-d", "k219": "{\"PurchaseId\":\"8bba0784-6d09-5e01-ddb4-a96d6bdd6bce\",\"TenantId\":\"49921e0f-c134-3", "k220": "{\"PurchaseId\":\"10768d40-19c3-5e1c-5898-44a96abacef1\",\"TenantId\":\"95477450-3c50-a", "k221": "{\"PurchaseId\":\"a467139c-acfd-2c80-332c-2b2592eadb86\",\"TenantId\":\"d230a6ed-c7c6-4", "k222": "{\"PurchaseId\":\"bae38860-545a-6a37-0da6-bdc710dade56\",\"TenantId\":\"a63904bf-0fda-6", "k223": "15", "k224": "{\"PurchaseId\":\"4f34ee71-b024-3d0c-ad4f-9cca64930663\",\"TenantId\":\"0ec75ff4-d279-6", "k225": "{\"PurchaseId\":\"a66f57ed-8f26-b271-12d3-b8584226194a\",\"TenantId\":\"a3410e8b-1b79-0", "k226": "{\"PurchaseId\":\"858e9b6d-ce05-f1f7-0d0e-920c1edffd41\",\"TenantId\":\"40a6d137-32a4-d", "k227": "{\"PurchaseId\":\"68c04308-a7fb-5c34-5387-95703b3089fc\",\"TenantId\":\"373b24d7-6918-f", "k228": "{\"PurchaseId\":\"2cd9c293-0dae-3d60-1d42-5ff66d0be7d4\",\"TenantId\":\"b3a416bd-2911-9", "k229": "{\"PurchaseId\":\"32a499e2-e494-4554-79dd-87a2ed1ca263\",\"TenantId\":\"d739a823-41f3-4", "k230": "{\"PurchaseId\":\"5ddc8f53-793b-63df-e392-abac0c46ed6e\",\"TenantId\":\"8142357b-cae0-1", "k231": "{\"PurchaseId\":\"584e49d4-0f31-89de-6e1e-0d654faf72e7\",\"TenantId\":\"cf5b5038-9076-2", "k232": "{\"PurchaseId\":\"101eaf4a-6ac3-158e-0de2-c8fed5a4d912\",\"TenantId\":\"edab81fe-2ad1-8", "k233": "{\"PurchaseId\":\"4090c26b-0144-68d5-2cba-c007068b13fc\",\"TenantId\":\"85ba4316-ef49-6", "k234": "{\"PurchaseId\":\"2a8f32f6-b882-4cea-e356-ffb879db5160\",\"TenantId\":\"da3259f9-6164-0", "k235": "{\"PurchaseId\":\"1f60526d-10a8-74cc-fc63-93ef8ffa7b8d\",\"TenantId\":\"b51d4fa8-b51d-3", "k236": "{\"PurchaseId\":\"34597acf-63de-8b72-e099-aa035ffb99d7\",\"TenantId\":\"67397084-9154-1", "k237": "{\"PurchaseId\":\"1b24abd8-5ad1-f414-101b-5d413a62f5c9\",\"TenantId\":\"5356c313-c6f6-0", "k238": "{\"PurchaseId\":\"07990363-9825-851c-ac88-2d125fcaedee\",\"TenantId\":\"d51d5411-cc8e-e", "k239": "{\"PurchaseId\":\"a6bf3d2d-3ad6-e2c3-b7f3-a9908671a992\",\"TenantId\":\"72542497-b988-d", "k240": "{\"PurchaseId\":\"7be35b94-8eac-d1e5-64a6-ea4bb2372a6b\",\"TenantId\":\"49921e0f-c134-3", "k241": "{\"PurchaseId\":\"583aa7bd-7c45-998d-fd86-545625e9caa1\",\"TenantId\":\"95477450-3c50-a", "k242": "{\"PurchaseId\":\"59ff1ea5-cdcf-ef1d-e437-452b6428d353\",\"TenantId\":\"d230a6ed-c7c6-4", "k243": "{\"PurchaseId\":\"a0fc47fc-a6cf-0500-ee26-3cbaf2621524\",\"TenantId\":\"a63904bf-0fda-6", "k244": "{\"PurchaseId\":\"3692da22-2655-bcfd-0920-d4bd676bd92c\",\"TenantId\":\"0ec75ff4-d279-6", "k245": "{\"PurchaseId\":\"1ab6ded8-a4f3-ee3e-7c2b-b84b582392af\",\"TenantId\":\"a3410e8b-1b79-0", "k246": "{\"PurchaseId\":\"f5129fa0-15f1-a4ec-e3bd-91aec66206e5\",\"TenantId\":\"40a6d137-32a4-d", "k247": "{\"PurchaseId\":\"01dc4c71-0aa9-3b47-63a6-60de510ee595\",\"TenantId\":\"373b24d7-6918-f", "k248": "{\"PurchaseId\":\"ce557780-ead4-46cf-767a-509bbcc178d3\",\"TenantId\":\"b3a416bd-2911-9", "k249": "{\"PurchaseId\":\"993cd1f4-fcf1-7048-0bdd-e6671c95d460\",\"TenantId\":\"d739a823-41f3-4", "k250": "{\"PurchaseId\":\"7032eeec-09d6-3414-732a-bf74b62443e0\",\"TenantId\":\"8142357b-cae0-1", "k251": "{\"PurchaseId\":\"eb3d1b77-4fdc-8816-2e6e-2f56fad041ba\",\"TenantId\":\"cf5b5038-9076-2", "k252": "{\"PurchaseId\":\"ea52cd38-1be8-6de6-6259-ce842f4f59bc\",\"TenantId\":\"edab81fe-2ad1-8", "k253": "{\"PurchaseId\":\"764f08e6-de23-79af-7c48-45c4ce79ddd4\",\"TenantId\":\"85ba4316-ef49-6", "k254": "{\"PurchaseId\":\"c15c3d4d-9ff8-15b2-f265-e636896c9325\",\"TenantId\":\"da3259f9-6164-0", "k255": "{\"PurchaseId\":\"080f4e97-03bc-72a9-5ead-b9ecf3a2d0a5\",\"TenantId\":\"b51d4fa8-b51d-3", "k256": "{\"PurchaseId\":\"1fe18731-a00c-254e-eb85-db5657f46717\",\"TenantId\":\"67397084-9154-1", "k257": "{\"PurchaseId\":\"6a9598d7-d3d4-376d-c364-d35a00f9ffc7\",\"TenantId\":\"5356c313-c6f6-0", "k258": "{\"PurchaseId\":\"22787734-f9a8-26d7-9774-c7fb5db4fbb4\",\"TenantId\":\"d51d5411-cc8e-e", "k259": "{\"PurchaseId\":\"9b036e03-82b4-e4f8-e12c-5a138e4e1e94\",\"TenantId\":\"72542497-b988-d", "k260": "{\"PurchaseId\":\"c5782cef-338f-e924-742d-a7aeb5be4f72\",\"TenantId\":\"49921e0f-c134-3", "k261": "{\"PurchaseId\":\"5548378d-c00d-888c-0bb9-0a7d6c45ef99\",\"TenantId\":\"95477450-3c50-a", "k262": "{\"PurchaseId\":\"efd50cc2-0c6a-c1ee-175b-fda0c447eacb\",\"TenantId\":\"d230a6ed-c7c6-4", "k263": "{\"PurchaseId\":\"adf5f692-e9ec-8a3d-6c0c-2b1605a28c8b\",\"TenantId\":\"a63904bf-0fda-6", "k264": "{\"PurchaseId\":\"5f6fb8e7-66d8-637d-56bb-9f4216be3767\",\"TenantId\":\"0ec75ff4-d279-6", "k265": "{\"PurchaseId\":\"5b51f858-0b73-cd0a-8e18-2a6736705c12\",\"TenantId\":\"a3410e8b-1b79-0", "k266": "2026-11-30T01:23:29.086674+00:00", "k267": "597", "k268": "{\"ExpiredCount\": 200, \"SkippedLocked\": 0, \"DurationMs\": 597, \"FailedCount\": 0}", "k269": "true", "as_of": "2026-12-01T01:23:28.459517+00:00"}
-- generated by bench/promotion.py from a recorded cycle of ExpirePromotionsJob; do not edit
WITH b AS (SELECT (nextval('public.bench_batch') - 1) * 200 AS base) SELECT md5('p' || chr(58) || 'pur' || chr(58) || (base + 1))::uuid AS p0, md5('p' || chr(58) || 'pur' || chr(58) || (base + 2))::uuid AS p1, md5('p' || chr(58) || 'pur' || chr(58) || (base + 3))::uuid AS p2, md5('p' || chr(58) || 'pur' || chr(58) || (base + 4))::uuid AS p3, md5('p' || chr(58) || 'pur' || chr(58) || (base + 5))::uuid AS p4, md5('p' || chr(58) || 'pur' || chr(58) || (base + 6))::uuid AS p5, md5('p' || chr(58) || 'pur' || chr(58) || (base + 7))::uuid AS p6, md5('p' || chr(58) || 'pur' || chr(58) || (base + 8))::uuid AS p7, md5('p' || chr(58) || 'pur' || chr(58) || (base + 9))::uuid AS p8, md5('p' || chr(58) || 'pur' || chr(58) || (base + 10))::uuid AS p9, md5('p' || chr(58) || 'pur' || chr(58) || (base + 11))::uuid AS p10, md5('p' || chr(58) || 'pur' || chr(58) || (base + 12))::uuid AS p11, md5('p' || chr(58) || 'pur' || chr(58) || (base + 13))::uuid AS p12, md5('p' || chr(58) || 'pur' || chr(58) || (base + 14))::uuid AS p13, md5('p' || chr(58) || 'pur' || chr(58) || (base + 15))::uuid AS p14, md5('p' || chr(58) || 'pur' || chr(58) || (base + 16))::uuid AS p15, md5('p' || chr(58) || 'pur' || chr(58) || (base + 17))::uuid AS p16, md5('p' || chr(58) || 'pur' || chr(58) || (base + 18))::uuid AS p17, md5('p' || chr(58) || 'pur' || chr(58) || (base + 19))::uuid AS p18, md5('p' || chr(58) || 'pur' || chr(58) || (base + 20))::uuid AS p19, md5('p' || chr(58) || 'pur' || chr(58) || (base + 21))::uuid AS p20, md5('p' || chr(58) || 'pur' || chr(58) || (base + 22))::uuid AS p21, md5('p' || chr(58) || 'pur' || chr(58) || (base + 23))::uuid AS p22, md5('p' || chr(58) || 'pur' || chr(58) || (base + 24))::uuid AS p23, md5('p' || chr(58) || 'pur' || chr(58) || (base + 25))::uuid AS p24, md5('p' || chr(58) || 'pur' || chr(58) || (base + 26))::uuid AS p25, md5('p' || chr(58) || 'pur' || chr(58) || (base + 27))::uuid AS p26, md5('p' || chr(58) || 'pur' || chr(58) || (base + 28))::uuid AS p27, md5('p' || chr(58) || 'pur' || chr(58) || (base + 29))::uuid AS p28, md5('p' || chr(58) || 'pur' || chr(58) || (base + 30))::uuid AS p29, md5('p' || chr(58) || 'pur' || chr(58) || (base + 31))::uuid AS p30, md5('p' || chr(58) || 'pur' || chr(58) || (base + 32))::uuid AS p31, md5('p' || chr(58) || 'pur' || chr(58) || (base + 33))::uuid AS p32, md5('p' || chr(58) || 'pur' || chr(58) || (base + 34))::uuid AS p33, md5('p' || chr(58) || 'pur' || chr(58) || (base + 35))::uuid AS p34, md5('p' || chr(58) || 'pur' || chr(58) || (base + 36))::uuid AS p35, md5('p' || chr(58) || 'pur' || chr(58) || (base + 37))::uuid AS p36, md5('p' || chr(58) || 'pur' || chr(58) || (base + 38))::uuid AS p37, md5('p' || chr(58) || 'pur' || chr(58) || (base + 39))::uuid AS p38, md5('p' || chr(58) || 'pur' || chr(58) || (base + 40))::uuid AS p39, md5('p' || chr(58) || 'pur' || chr(58) || (base + 41))::uuid AS p40, md5('p' || chr(58) || 'pur' || chr(58) || (base + 42))::uuid AS p41, md5('p' || chr(58) || 'pur' || chr(58) || (base + 43))::uuid AS p42, md5('p' || chr(58) || 'pur' || chr(58) || (base + 44))::uuid AS p43, md5('p' || chr(58) || 'pur' || chr(58) || (base + 45))::uuid AS p44, md5('p' || chr(58) || 'pur' || chr(58) || (base + 46))::uuid AS p45, md5('p' || chr(58) || 'pur' || chr(58) || (base + 47))::uuid AS p46, md5('p' || chr(58) || 'pur' || chr(58) || (base + 48))::uuid AS p47, md5('p' || chr(58) || 'pur' || chr(58) || (base + 49))::uuid AS p48, md5('p' || chr(58) || 'pur' || chr(58) || (base + 50))::uuid AS p49, md5('p' || chr(58) || 'pur' || chr(58) || (base + 51))::uuid AS p50, md5('p' || chr(58) || 'pur' || chr(58) || (base + 52))::uuid AS p51, md5('p' || chr(58) || 'pur' || chr(58) || (base + 53))::uuid AS p52, md5('p' || chr(58) || 'pur' || chr(58) || (base + 54))::uuid AS p53, md5('p' || chr(58) || 'pur' || chr(58) || (base + 55))::uuid AS p54, md5('p' || chr(58) || 'pur' || chr(58) || (base + 56))::uuid AS p55, md5('p' || chr(58) || 'pur' || chr(58) || (base + 57))::uuid AS p56, md5('p' || chr(58) || 'pur' || chr(58) || (base + 58))::uuid AS p57, md5('p' || chr(58) || 'pur' || chr(58) || (base + 59))::uuid AS p58, md5('p' || chr(58) || 'pur' || chr(58) || (base + 60))::uuid AS p59, md5('p' || chr(58) || 'pur' || chr(58) || (base + 61))::uuid AS p60, md5('p' || chr(58) || 'pur' || chr(58) || (base + 62))::uuid AS p61, md5('p' || chr(58) || 'pur' || chr(58) || (base + 63))::uuid AS p62, md5('p' || chr(58) || 'pur' || chr(58) || (base + 64))::uuid AS p63, md5('p' || chr(58) || 'pur' || chr(58) || (base + 65))::uuid AS p64, md5('p' || chr(58) || 'pur' || chr(58) || (base + 66))::uuid AS p65, md5('p' || chr(58) || 'pur' || chr(58) || (base + 67))::uuid AS p66, md5('p' || chr(58) || 'pur' || chr(58) || (base + 68))::uuid AS p67, md5('p' || chr(58) || 'pur' || chr(58) || (base + 69))::uuid AS p68, md5('p' || chr(58) || 'pur' || chr(58) || (base + 70))::uuid AS p69, md5('p' || chr(58) || 'pur' || chr(58) || (base + 71))::uuid AS p70, md5('p' || chr(58) || 'pur' || chr(58) || (base + 72))::uuid AS p71, md5('p' || chr(58) || 'pur' || chr(58) || (base + 73))::uuid AS p72, md5('p' || chr(58) || 'pur' || chr(58) || (base + 74))::uuid AS p73, md5('p' || chr(58) || 'pur' || chr(58) || (base + 75))::uuid AS p74, md5('p' || chr(58) || 'pur' || chr(58) || (base + 76))::uuid AS p75, md5('p' || chr(58) || 'pur' || chr(58) || (base + 77))::uuid AS p76, md5('p' || chr(58) || 'pur' || chr(58) || (base + 78))::uuid AS p77, md5('p' || chr(58) || 'pur' || chr(58) || (base + 79))::uuid AS p78, md5('p' || chr(58) || 'pur' || chr(58) || (base + 80))::uuid AS p79, md5('p' || chr(58) || 'pur' || chr(58) || (base + 81))::uuid AS p80, md5('p' || chr(58) || 'pur' || chr(58) || (base + 82))::uuid AS p81, md5('p' || chr(58) || 'pur' || chr(58) || (base + 83))::uuid AS p82, md5('p' || chr(58) || 'pur' || chr(58) || (base + 84))::uuid AS p83, md5('p' || chr(58) || 'pur' || chr(58) || (base + 85))::uuid AS p84, md5('p' || chr(58) || 'pur' || chr(58) || (base + 86))::uuid AS p85, md5('p' || chr(58) || 'pur' || chr(58) || (base + 87))::uuid AS p86, md5('p' || chr(58) || 'pur' || chr(58) || (base + 88))::uuid AS p87, md5('p' || chr(58) || 'pur' || chr(58) || (base + 89))::uuid AS p88, md5('p' || chr(58) || 'pur' || chr(58) || (base + 90))::uuid AS p89, md5('p' || chr(58) || 'pur' || chr(58) || (base + 91))::uuid AS p90, md5('p' || chr(58) || 'pur' || chr(58) || (base + 92))::uuid AS p91, md5('p' || chr(58) || 'pur' || chr(58) || (base + 93))::uuid AS p92, md5('p' || chr(58) || 'pur' || chr(58) || (base + 94))::uuid AS p93, md5('p' || chr(58) || 'pur' || chr(58) || (base + 95))::uuid AS p94, md5('p' || chr(58) || 'pur' || chr(58) || (base + 96))::uuid AS p95, md5('p' || chr(58) || 'pur' || chr(58) || (base + 97))::uuid AS p96, md5('p' || chr(58) || 'pur' || chr(58) || (base + 98))::uuid AS p97, md5('p' || chr(58) || 'pur' || chr(58) || (base + 99))::uuid AS p98, md5('p' || chr(58) || 'pur' || chr(58) || (base + 100))::uuid AS p99, md5('p' || chr(58) || 'pur' || chr(58) || (base + 101))::uuid AS p100, md5('p' || chr(58) || 'pur' || chr(58) || (base + 102))::uuid AS p101, md5('p' || chr(58) || 'pur' || chr(58) || (base + 103))::uuid AS p102, md5('p' || chr(58) || 'pur' || chr(58) || (base + 104))::uuid AS p103, md5('p' || chr(58) || 'pur' || chr(58) || (base + 105))::uuid AS p104, md5('p' || chr(58) || 'pur' || chr(58) || (base + 106))::uuid AS p105, md5('p' || chr(58) || 'pur' || chr(58) || (base + 107))::uuid AS p106, md5('p' || chr(58) || 'pur' || chr(58) || (base + 108))::uuid AS p107, md5('p' || chr(58) || 'pur' || chr(58) || (base + 109))::uuid AS p108, md5('p' || chr(58) || 'pur' || chr(58) || (base + 110))::uuid AS p109, md5('p' || chr(58) || 'pur' || chr(58) || (base + 111))::uuid AS p110, md5('p' || chr(58) || 'pur' || chr(58) || (base + 112))::uuid AS p111, md5('p' || chr(58) || 'pur' || chr(58) || (base + 113))::uuid AS p112, md5('p' || chr(58) || 'pur' || chr(58) || (base + 114))::uuid AS p113, md5('p' || chr(58) || 'pur' || chr(58) || (base + 115))::uuid AS p114, md5('p' || chr(58) || 'pur' || chr(58) || (base + 116))::uuid AS p115, md5('p' || chr(58) || 'pur' || chr(58) || (base + 117))::uuid AS p116, md5('p' || chr(58) || 'pur' || chr(58) || (base + 118))::uuid AS p117, md5('p' || chr(58) || 'pur' || chr(58) || (base + 119))::uuid AS p118, md5('p' || chr(58) || 'pur' || chr(58) || (base + 120))::uuid AS p119, md5('p' || chr(58) || 'pur' || chr(58) || (base + 121))::uuid AS p120, md5('p' || chr(58) || 'pur' || chr(58) || (base + 122))::uuid AS p121, md5('p' || chr(58) || 'pur' || chr(58) || (base + 123))::uuid AS p122, md5('p' || chr(58) || 'pur' || chr(58) || (base + 124))::uuid AS p123, md5('p' || chr(58) || 'pur' || chr(58) || (base + 125))::uuid AS p124, md5('p' || chr(58) || 'pur' || chr(58) || (base + 126))::uuid AS p125, md5('p' || chr(58) || 'pur' || chr(58) || (base + 127))::uuid AS p126, md5('p' || chr(58) || 'pur' || chr(58) || (base + 128))::uuid AS p127, md5('p' || chr(58) || 'pur' || chr(58) || (base + 129))::uuid AS p128, md5('p' || chr(58) || 'pur' || chr(58) || (base + 130))::uuid AS p129, md5('p' || chr(58) || 'pur' || chr(58) || (base + 131))::uuid AS p130, md5('p' || chr(58) || 'pur' || chr(58) || (base + 132))::uuid AS p131, md5('p' || chr(58) || 'pur' || chr(58) || (base + 133))::uuid AS p132, md5('p' || chr(58) || 'pur' || chr(58) || (base + 134))::uuid AS p133, md5('p' || chr(58) || 'pur' || chr(58) || (base + 135))::uuid AS p134, md5('p' || chr(58) || 'pur' || chr(58) || (base + 136))::uuid AS p135, md5('p' || chr(58) || 'pur' || chr(58) || (base + 137))::uuid AS p136, md5('p' || chr(58) || 'pur' || chr(58) || (base + 138))::uuid AS p137, md5('p' || chr(58) || 'pur' || chr(58) || (base + 139))::uuid AS p138, md5('p' || chr(58) || 'pur' || chr(58) || (base + 140))::uuid AS p139, md5('p' || chr(58) || 'pur' || chr(58) || (base + 141))::uuid AS p140, md5('p' || chr(58) || 'pur' || chr(58) || (base + 142))::uuid AS p141, md5('p' || chr(58) || 'pur' || chr(58) || (base + 143))::uuid AS p142, md5('p' || chr(58) || 'pur' || chr(58) || (base + 144))::uuid AS p143, md5('p' || chr(58) || 'pur' || chr(58) || (base + 145))::uuid AS p144, md5('p' || chr(58) || 'pur' || chr(58) || (base + 146))::uuid AS p145, md5('p' || chr(58) || 'pur' || chr(58) || (base + 147))::uuid AS p146, md5('p' || chr(58) || 'pur' || chr(58) || (base + 148))::uuid AS p147, md5('p' || chr(58) || 'pur' || chr(58) || (base + 149))::uuid AS p148, md5('p' || chr(58) || 'pur' || chr(58) || (base + 150))::uuid AS p149, md5('p' || chr(58) || 'pur' || chr(58) || (base + 151))::uuid AS p150, md5('p' || chr(58) || 'pur' || chr(58) || (base + 152))::uuid AS p151, md5('p' || chr(58) || 'pur' || chr(58) || (base + 153))::uuid AS p152, md5('p' || chr(58) || 'pur' || chr(58) || (base + 154))::uuid AS p153, md5('p' || chr(58) || 'pur' || chr(58) || (base + 155))::uuid AS p154, md5('p' || chr(58) || 'pur' || chr(58) || (base + 156))::uuid AS p155, md5('p' || chr(58) || 'pur' || chr(58) || (base + 157))::uuid AS p156, md5('p' || chr(58) || 'pur' || chr(58) || (base + 158))::uuid AS p157, md5('p' || chr(58) || 'pur' || chr(58) || (base + 159))::uuid AS p158, md5('p' || chr(58) || 'pur' || chr(58) || (base + 160))::uuid AS p159, md5('p' || chr(58) || 'pur' || chr(58) || (base + 161))::uuid AS p160, md5('p' || chr(58) || 'pur' || chr(58) || (base + 162))::uuid AS p161, md5('p' || chr(58) || 'pur' || chr(58) || (base + 163))::uuid AS p162, md5('p' || chr(58) || 'pur' || chr(58) || (base + 164))::uuid AS p163, md5('p' || chr(58) || 'pur' || chr(58) || (base + 165))::uuid AS p164, md5('p' || chr(58) || 'pur' || chr(58) || (base + 166))::uuid AS p165, md5('p' || chr(58) || 'pur' || chr(58) || (base + 167))::uuid AS p166, md5('p' || chr(58) || 'pur' || chr(58) || (base + 168))::uuid AS p167, md5('p' || chr(58) || 'pur' || chr(58) || (base + 169))::uuid AS p168, md5('p' || chr(58) || 'pur' || chr(58) || (base + 170))::uuid AS p169, md5('p' || chr(58) || 'pur' || chr(58) || (base + 171))::uuid AS p170, md5('p' || chr(58) || 'pur' || chr(58) || (base + 172))::uuid AS p171, md5('p' || chr(58) || 'pur' || chr(58) || (base + 173))::uuid AS p172, md5('p' || chr(58) || 'pur' || chr(58) || (base + 174))::uuid AS p173, md5('p' || chr(58) || 'pur' || chr(58) || (base + 175))::uuid AS p174, md5('p' || chr(58) || 'pur' || chr(58) || (base + 176))::uuid AS p175, md5('p' || chr(58) || 'pur' || chr(58) || (base + 177))::uuid AS p176, md5('p' || chr(58) || 'pur' || chr(58) || (base + 178))::uuid AS p177, md5('p' || chr(58) || 'pur' || chr(58) || (base + 179))::uuid AS p178, md5('p' || chr(58) || 'pur' || chr(58) || (base + 180))::uuid AS p179, md5('p' || chr(58) || 'pur' || chr(58) || (base + 181))::uuid AS p180, md5('p' || chr(58) || 'pur' || chr(58) || (base + 182))::uuid AS p181, md5('p' || chr(58) || 'pur' || chr(58) || (base + 183))::uuid AS p182, md5('p' || chr(58) || 'pur' || chr(58) || (base + 184))::uuid AS p183, md5('p' || chr(58) || 'pur' || chr(58) || (base + 185))::uuid AS p184, md5('p' || chr(58) || 'pur' || chr(58) || (base + 186))::uuid AS p185, md5('p' || chr(58) || 'pur' || chr(58) || (base + 187))::uuid AS p186, md5('p' || chr(58) || 'pur' || chr(58) || (base + 188))::uuid AS p187, md5('p' || chr(58) || 'pur' || chr(58) || (base + 189))::uuid AS p188, md5('p' || chr(58) || 'pur' || chr(58) || (base + 190))::uuid AS p189, md5('p' || chr(58) || 'pur' || chr(58) || (base + 191))::uuid AS p190, md5('p' || chr(58) || 'pur' || chr(58) || (base + 192))::uuid AS p191, md5('p' || chr(58) || 'pur' || chr(58) || (base + 193))::uuid AS p192, md5('p' || chr(58) || 'pur' || chr(58) || (base + 194))::uuid AS p193, md5('p' || chr(58) || 'pur' || chr(58) || (base + 195))::uuid AS p194, md5('p' || chr(58) || 'pur' || chr(58) || (base + 196))::uuid AS p195, md5('p' || chr(58) || 'pur' || chr(58) || (base + 197))::uuid AS p196, md5('p' || chr(58) || 'pur' || chr(58) || (base + 198))::uuid AS p197, md5('p' || chr(58) || 'pur' || chr(58) || (base + 199))::uuid AS p198, md5('p' || chr(58) || 'pur' || chr(58) || (base + 200))::uuid AS p199, gen_random_uuid() AS m0, gen_random_uuid() AS m1, gen_random_uuid() AS m2, gen_random_uuid() AS m3, gen_random_uuid() AS m4, gen_random_uuid() AS m5, gen_random_uuid() AS m6, gen_random_uuid() AS m7, gen_random_uuid() AS m8, gen_random_uuid() AS m9, gen_random_uuid() AS m10, gen_random_uuid() AS m11, gen_random_uuid() AS m12, gen_random_uuid() AS m13, gen_random_uuid() AS m14, gen_random_uuid() AS m15, gen_random_uuid() AS m16, gen_random_uuid() AS m17, gen_random_uuid() AS m18, gen_random_uuid() AS m19, gen_random_uuid() AS m20, gen_random_uuid() AS m21, gen_random_uuid() AS m22, gen_random_uuid() AS m23, gen_random_uuid() AS m24, gen_random_uuid() AS m25, gen_random_uuid() AS m26, gen_random_uuid() AS m27, gen_random_uuid() AS m28, gen_random_uuid() AS m29, gen_random_uuid() AS m30, gen_random_uuid() AS m31, gen_random_uuid() AS m32, gen_random_uuid() AS m33, gen_random_uuid() AS m34, gen_random_uuid() AS m35, gen_random_uuid() AS m36, gen_random_uuid() AS m37, gen_random_uuid() AS m38, gen_random_uuid() AS m39, gen_random_uuid() AS m40, gen_random_uuid() AS m41, gen_random_uuid() AS m42, gen_random_uuid() AS m43, gen_random_uuid() AS m44, gen_random_uuid() AS m45, gen_random_uuid() AS m46, gen_random_uuid() AS m47, gen_random_uuid() AS m48, gen_random_uuid() AS m49, gen_random_uuid() AS m50, gen_random_uuid() AS m51, gen_random_uuid() AS m52, gen_random_uuid() AS m53, gen_random_uuid() AS m54, gen_random_uuid() AS m55, gen_random_uuid() AS m56, gen_random_uuid() AS m57, gen_random_uuid() AS m58, gen_random_uuid() AS m59, gen_random_uuid() AS m60, gen_random_uuid() AS m61, gen_random_uuid() AS m62, gen_random_uuid() AS m63, gen_random_uuid() AS m64, gen_random_uuid() AS m65, gen_random_uuid() AS m66, gen_random_uuid() AS m67, gen_random_uuid() AS m68, gen_random_uuid() AS m69, gen_random_uuid() AS m70, gen_random_uuid() AS m71, gen_random_uuid() AS m72, gen_random_uuid() AS m73, gen_random_uuid() AS m74, gen_random_uuid() AS m75, gen_random_uuid() AS m76, gen_random_uuid() AS m77, gen_random_uuid() AS m78, gen_random_uuid() AS m79, gen_random_uuid() AS m80, gen_random_uuid() AS m81, gen_random_uuid() AS m82, gen_random_uuid() AS m83, gen_random_uuid() AS m84, gen_random_uuid() AS m85, gen_random_uuid() AS m86, gen_random_uuid() AS m87, gen_random_uuid() AS m88, gen_random_uuid() AS m89, gen_random_uuid() AS m90, gen_random_uuid() AS m91, gen_random_uuid() AS m92, gen_random_uuid() AS m93, gen_random_uuid() AS m94, gen_random_uuid() AS m95, gen_random_uuid() AS m96, gen_random_uuid() AS m97, gen_random_uuid() AS m98, gen_random_uuid() AS m99, gen_random_uuid() AS m100, gen_random_uuid() AS m101, gen_random_uuid() AS m102, gen_random_uuid() AS m103, gen_random_uuid() AS m104, gen_random_uuid() AS m105, gen_random_uuid() AS m106, gen_random_uuid() AS m107, gen_random_uuid() AS m108, gen_random_uuid() AS m109, gen_random_uuid() AS m110, gen_random_uuid() AS m111, gen_random_uuid() AS m112, gen_random_uuid() AS m113, gen_random_uuid() AS m114, gen_random_uuid() AS m115, gen_random_uuid() AS m116, gen_random_uuid() AS m117, gen_random_uuid() AS m118, gen_random_uuid() AS m119, gen_random_uuid() AS m120, gen_random_uuid() AS m121, gen_random_uuid() AS m122, gen_random_uuid() AS m123, gen_random_uuid() AS m124, gen_random_uuid() AS m125, gen_random_uuid() AS m126, gen_random_uuid() AS m127, gen_random_uuid() AS m128, gen_random_uuid() AS m129, gen_random_uuid() AS m130, gen_random_uuid() AS m131, gen_random_uuid() AS m132, gen_random_uuid() AS m133, gen_random_uuid() AS m134, gen_random_uuid() AS m135, gen_random_uuid() AS m136, gen_random_uuid() AS m137, gen_random_uuid() AS m138, gen_random_uuid() AS m139, gen_random_uuid() AS m140, gen_random_uuid() AS m141, gen_random_uuid() AS m142, gen_random_uuid() AS m143, gen_random_uuid() AS m144, gen_random_uuid() AS m145, gen_random_uuid() AS m146, gen_random_uuid() AS m147, gen_random_uuid() AS m148, gen_random_uuid() AS m149, gen_random_uuid() AS m150, gen_random_uuid() AS m151, gen_random_uuid() AS m152, gen_random_uuid() AS m153, gen_random_uuid() AS m154, gen_random_uuid() AS m155, gen_random_uuid() AS m156, gen_random_uuid() AS m157, gen_random_uuid() AS m158, gen_random_uuid() AS m159, gen_random_uuid() AS m160, gen_random_uuid() AS m161, gen_random_uuid() AS m162, gen_random_uuid() AS m163, gen_random_uuid() AS m164, gen_random_uuid() AS m165, gen_random_uuid() AS m166, gen_random_uuid() AS m167, gen_random_uuid() AS m168, gen_random_uuid() AS m169, gen_random_uuid() AS m170, gen_random_uuid() AS m171, gen_random_uuid() AS m172, gen_random_uuid() AS m173, gen_random_uuid() AS m174, gen_random_uuid() AS m175, gen_random_uuid() AS m176, gen_random_uuid() AS m177, gen_random_uuid() AS m178, gen_random_uuid() AS m179, gen_random_uuid() AS m180, gen_random_uuid() AS m181, gen_random_uuid() AS m182, gen_random_uuid() AS m183, gen_random_uuid() AS m184, gen_random_uuid() AS m185, gen_random_uuid() AS m186, gen_random_uuid() AS m187, gen_random_uuid() AS m188, gen_random_uuid() AS m189, gen_random_uuid() AS m190, gen_random_uuid() AS m191, gen_random_uuid() AS m192, gen_random_uuid() AS m193, gen_random_uuid() AS m194, gen_random_uuid() AS m195, gen_random_uuid() AS m196, gen_random_uuid() AS m197, gen_random_uuid() AS m198, gen_random_uuid() AS m199, gen_random_uuid() AS m200 FROM b \gset h_
SELECT;
BEGIN;
SELECT set_config('statement_timeout', :k0, true);
SELECT set_config('idle_in_transaction_session_timeout', :k0, true);
SELECT clock_timestamp() AS now;
WITH claimed AS MATERIALIZED (
    SELECT p.id, p.ends_at
      FROM promotion.purchase AS p
     WHERE p.status = 'Active' AND p.ends_at <= :as_of::timestamptz AND NOT EXISTS (SELECT 1 FROM jobs.item_failure AS f WHERE f.job = :k1 AND f.item_id = p.id AND f.next_attempt_at > :as_of::timestamptz)
     ORDER BY p.ends_at, p.id
     LIMIT :k2
       FOR NO KEY UPDATE OF p SKIP LOCKED
),
last_claimed AS (
    SELECT c.ends_at, c.id FROM claimed AS c ORDER BY c.ends_at DESC, c.id DESC LIMIT 1
),
horizon AS (
    -- When the batch was full, a skipped row can only sort before the last claimed one: that bounds the
    -- index range scanned below. Otherwise (NULL) every due row up to AsOf was a candidate.
    SELECT CASE WHEN (SELECT count(*) FROM claimed) >= :k2 THEN l.ends_at END AS ends_at, l.id
      FROM last_claimed AS l
),
skipped AS (
    SELECT count(*) AS n FROM (
        SELECT 1
          FROM promotion.purchase AS p
         WHERE p.status = 'Active' AND p.ends_at <= :as_of::timestamptz AND NOT EXISTS (SELECT 1 FROM jobs.item_failure AS f WHERE f.job = :k1 AND f.item_id = p.id AND f.next_attempt_at > :as_of::timestamptz)
           AND p.ends_at <= coalesce((SELECT h.ends_at FROM horizon AS h), :as_of::timestamptz)
           AND (NOT EXISTS (SELECT 1 FROM horizon AS h WHERE h.ends_at IS NOT NULL)
                OR (p.ends_at, p.id) < (SELECT h.ends_at, h.id FROM horizon AS h))
           AND NOT EXISTS (SELECT 1 FROM claimed AS c WHERE c.id = p.id)
         LIMIT 10001
    ) AS s
)
SELECT s.n AS skipped_locked, due.*
  FROM skipped AS s
  LEFT JOIN (
      SELECT 
    p.id, p.tenant_id, p.buyer_user_id, p.package_id, p.package_code, p.package_kind, p.boost_weight,
    p.price_amount, p.currency_id, p.currency_code, p.currency_symbol, p.starts_at, p.ends_at, p.status,
    p.payment_status, p.version, p.created_at, p.updated_at,
    (SELECT coalesce(json_agg(json_build_object('kind', t.target_kind, 'id', t.target_id) ORDER BY t.position),
                     '[]'::json)
       FROM promotion.purchase_target AS t WHERE t.purchase_id = p.id) AS targets

        FROM claimed AS c JOIN promotion.purchase AS p ON p.id = c.id
  ) AS due ON true
 ORDER BY due.ends_at, due.id;
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p0::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p1::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p2::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p3::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p4::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p5::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p6::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p7::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p8::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p9::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p10::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p11::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p12::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p13::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p14::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p15::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p16::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p17::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p18::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p19::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p20::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p21::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p22::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p23::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p24::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p25::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p26::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p27::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p28::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p29::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p30::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p31::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p32::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p33::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p34::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p35::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p36::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p37::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p38::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p39::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p40::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p41::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p42::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p43::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p44::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p45::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p46::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p47::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p48::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p49::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p50::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p51::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p52::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p53::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p54::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p55::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p56::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p57::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p58::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p59::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p60::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p61::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p62::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p63::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p64::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p65::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p66::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p67::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p68::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p69::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p70::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p71::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p72::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p73::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p74::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p75::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p76::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p77::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p78::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p79::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p80::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p81::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p82::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p83::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p84::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p85::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p86::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p87::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p88::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p89::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p90::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p91::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p92::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p93::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p94::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p95::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p96::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p97::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p98::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p99::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p100::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p101::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p102::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p103::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p104::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p105::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p106::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p107::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p108::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p109::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p110::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p111::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p112::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p113::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p114::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p115::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p116::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p117::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p118::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p119::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p120::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p121::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p122::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p123::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p124::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p125::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p126::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p127::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p128::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p129::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p130::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p131::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p132::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p133::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p134::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p135::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p136::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p137::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p138::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p139::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p140::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p141::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p142::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p143::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p144::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p145::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p146::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p147::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p148::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p149::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p150::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p151::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p152::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p153::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p154::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p155::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p156::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p157::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p158::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p159::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p160::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p161::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p162::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p163::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p164::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p165::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p166::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p167::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p168::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p169::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p170::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p171::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p172::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p173::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p174::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p175::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p176::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p177::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p178::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p179::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p180::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p181::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p182::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p183::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p184::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p185::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p186::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p187::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p188::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p189::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p190::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p191::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p192::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p193::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p194::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p195::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p196::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p197::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p198::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
SAVEPOINT "_pg3_1";
UPDATE promotion.purchase
               SET status = :k3, version = :k4, updated_at = :as_of::timestamptz
             WHERE id = :h_p199::uuid AND status = 'Active' AND version = :k5;
RELEASE "_pg3_1";
DELETE FROM jobs.item_failure WHERE job = :k1 AND item_id = ANY(ARRAY[:h_p0::uuid, :h_p1::uuid, :h_p2::uuid, :h_p3::uuid, :h_p4::uuid, :h_p5::uuid, :h_p6::uuid, :h_p7::uuid, :h_p8::uuid, :h_p9::uuid, :h_p10::uuid, :h_p11::uuid, :h_p12::uuid, :h_p13::uuid, :h_p14::uuid, :h_p15::uuid, :h_p16::uuid, :h_p17::uuid, :h_p18::uuid, :h_p19::uuid, :h_p20::uuid, :h_p21::uuid, :h_p22::uuid, :h_p23::uuid, :h_p24::uuid, :h_p25::uuid, :h_p26::uuid, :h_p27::uuid, :h_p28::uuid, :h_p29::uuid, :h_p30::uuid, :h_p31::uuid, :h_p32::uuid, :h_p33::uuid, :h_p34::uuid, :h_p35::uuid, :h_p36::uuid, :h_p37::uuid, :h_p38::uuid, :h_p39::uuid, :h_p40::uuid, :h_p41::uuid, :h_p42::uuid, :h_p43::uuid, :h_p44::uuid, :h_p45::uuid, :h_p46::uuid, :h_p47::uuid, :h_p48::uuid, :h_p49::uuid, :h_p50::uuid, :h_p51::uuid, :h_p52::uuid, :h_p53::uuid, :h_p54::uuid, :h_p55::uuid, :h_p56::uuid, :h_p57::uuid, :h_p58::uuid, :h_p59::uuid, :h_p60::uuid, :h_p61::uuid, :h_p62::uuid, :h_p63::uuid, :h_p64::uuid, :h_p65::uuid, :h_p66::uuid, :h_p67::uuid, :h_p68::uuid, :h_p69::uuid, :h_p70::uuid, :h_p71::uuid, :h_p72::uuid, :h_p73::uuid, :h_p74::uuid, :h_p75::uuid, :h_p76::uuid, :h_p77::uuid, :h_p78::uuid, :h_p79::uuid, :h_p80::uuid, :h_p81::uuid, :h_p82::uuid, :h_p83::uuid, :h_p84::uuid, :h_p85::uuid, :h_p86::uuid, :h_p87::uuid, :h_p88::uuid, :h_p89::uuid, :h_p90::uuid, :h_p91::uuid, :h_p92::uuid, :h_p93::uuid, :h_p94::uuid, :h_p95::uuid, :h_p96::uuid, :h_p97::uuid, :h_p98::uuid, :h_p99::uuid, :h_p100::uuid, :h_p101::uuid, :h_p102::uuid, :h_p103::uuid, :h_p104::uuid, :h_p105::uuid, :h_p106::uuid, :h_p107::uuid, :h_p108::uuid, :h_p109::uuid, :h_p110::uuid, :h_p111::uuid, :h_p112::uuid, :h_p113::uuid, :h_p114::uuid, :h_p115::uuid, :h_p116::uuid, :h_p117::uuid, :h_p118::uuid, :h_p119::uuid, :h_p120::uuid, :h_p121::uuid, :h_p122::uuid, :h_p123::uuid, :h_p124::uuid, :h_p125::uuid, :h_p126::uuid, :h_p127::uuid, :h_p128::uuid, :h_p129::uuid, :h_p130::uuid, :h_p131::uuid, :h_p132::uuid, :h_p133::uuid, :h_p134::uuid, :h_p135::uuid, :h_p136::uuid, :h_p137::uuid, :h_p138::uuid, :h_p139::uuid, :h_p140::uuid, :h_p141::uuid, :h_p142::uuid, :h_p143::uuid, :h_p144::uuid, :h_p145::uuid, :h_p146::uuid, :h_p147::uuid, :h_p148::uuid, :h_p149::uuid, :h_p150::uuid, :h_p151::uuid, :h_p152::uuid, :h_p153::uuid, :h_p154::uuid, :h_p155::uuid, :h_p156::uuid, :h_p157::uuid, :h_p158::uuid, :h_p159::uuid, :h_p160::uuid, :h_p161::uuid, :h_p162::uuid, :h_p163::uuid, :h_p164::uuid, :h_p165::uuid, :h_p166::uuid, :h_p167::uuid, :h_p168::uuid, :h_p169::uuid, :h_p170::uuid, :h_p171::uuid, :h_p172::uuid, :h_p173::uuid, :h_p174::uuid, :h_p175::uuid, :h_p176::uuid, :h_p177::uuid, :h_p178::uuid, :h_p179::uuid, :h_p180::uuid, :h_p181::uuid, :h_p182::uuid, :h_p183::uuid, :h_p184::uuid, :h_p185::uuid, :h_p186::uuid, :h_p187::uuid, :h_p188::uuid, :h_p189::uuid, :h_p190::uuid, :h_p191::uuid, :h_p192::uuid, :h_p193::uuid, :h_p194::uuid, :h_p195::uuid, :h_p196::uuid, :h_p197::uuid, :h_p198::uuid, :h_p199::uuid]::uuid[]);
\startpipeline
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m0::uuid, :k6, :k7, :h_p0, :k8, :k5, :k9::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m1::uuid, :k11, :k7, :h_p1, :k8, :k5, :k12::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m2::uuid, :k13, :k7, :h_p2, :k8, :k5, :k14::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m3::uuid, :k15, :k7, :h_p3, :k8, :k5, :k16::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m4::uuid, :k17, :k7, :h_p4, :k8, :k5, :k18::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m5::uuid, :k19, :k7, :h_p5, :k8, :k5, :k20::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m6::uuid, :k21, :k7, :h_p6, :k8, :k5, :k22::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m7::uuid, :k17, :k7, :h_p7, :k8, :k5, :k23::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m8::uuid, :k24, :k7, :h_p8, :k8, :k5, :k25::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m9::uuid, :k26, :k7, :h_p9, :k8, :k5, :k27::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m10::uuid, :k28, :k7, :h_p10, :k8, :k5, :k29::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m11::uuid, :k30, :k7, :h_p11, :k8, :k5, :k31::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m12::uuid, :k26, :k7, :h_p12, :k8, :k5, :k32::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m13::uuid, :k33, :k7, :h_p13, :k8, :k5, :k34::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m14::uuid, :k6, :k7, :h_p14, :k8, :k5, :k35::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m15::uuid, :k36, :k7, :h_p15, :k8, :k5, :k37::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m16::uuid, :k38, :k7, :h_p16, :k8, :k5, :k39::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m17::uuid, :k40, :k7, :h_p17, :k8, :k5, :k41::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m18::uuid, :k42, :k7, :h_p18, :k8, :k5, :k43::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m19::uuid, :k26, :k7, :h_p19, :k8, :k5, :k44::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m20::uuid, :k21, :k7, :h_p20, :k8, :k5, :k45::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m21::uuid, :k46, :k7, :h_p21, :k8, :k5, :k47::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m22::uuid, :k19, :k7, :h_p22, :k8, :k5, :k48::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m23::uuid, :k33, :k7, :h_p23, :k8, :k5, :k49::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m24::uuid, :k50, :k7, :h_p24, :k8, :k5, :k51::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m25::uuid, :k52, :k7, :h_p25, :k8, :k5, :k53::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m26::uuid, :k54, :k7, :h_p26, :k8, :k5, :k55::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m27::uuid, :k56, :k7, :h_p27, :k8, :k5, :k57::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m28::uuid, :k24, :k7, :h_p28, :k8, :k5, :k58::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m29::uuid, :k59, :k7, :h_p29, :k8, :k5, :k60::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m30::uuid, :k61, :k7, :h_p30, :k8, :k5, :k62::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m31::uuid, :k19, :k7, :h_p31, :k8, :k5, :k63::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m32::uuid, :k64, :k7, :h_p32, :k8, :k5, :k65::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m33::uuid, :k28, :k7, :h_p33, :k8, :k5, :k66::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m34::uuid, :k52, :k7, :h_p34, :k8, :k5, :k67::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m35::uuid, :k68, :k7, :h_p35, :k8, :k5, :k69::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m36::uuid, :k70, :k7, :h_p36, :k8, :k5, :k71::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m37::uuid, :k72, :k7, :h_p37, :k8, :k5, :k73::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m38::uuid, :k74, :k7, :h_p38, :k8, :k5, :k75::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m39::uuid, :k76, :k7, :h_p39, :k8, :k5, :k77::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m40::uuid, :k78, :k7, :h_p40, :k8, :k5, :k79::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m41::uuid, :k5, :k7, :h_p41, :k8, :k5, :k80::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m42::uuid, :k74, :k7, :h_p42, :k8, :k5, :k81::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m43::uuid, :k82, :k7, :h_p43, :k8, :k5, :k83::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m44::uuid, :k24, :k7, :h_p44, :k8, :k5, :k84::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m45::uuid, :k85, :k7, :h_p45, :k8, :k5, :k86::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m46::uuid, :k70, :k7, :h_p46, :k8, :k5, :k87::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m47::uuid, :k64, :k7, :h_p47, :k8, :k5, :k88::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m48::uuid, :k76, :k7, :h_p48, :k8, :k5, :k89::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m49::uuid, :k90, :k7, :h_p49, :k8, :k5, :k91::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m50::uuid, :k92, :k7, :h_p50, :k8, :k5, :k93::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m51::uuid, :k85, :k7, :h_p51, :k8, :k5, :k94::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m52::uuid, :k95, :k7, :h_p52, :k8, :k5, :k96::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m53::uuid, :k72, :k7, :h_p53, :k8, :k5, :k97::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m54::uuid, :k98, :k7, :h_p54, :k8, :k5, :k99::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m55::uuid, :k26, :k7, :h_p55, :k8, :k5, :k100::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m56::uuid, :k101, :k7, :h_p56, :k8, :k5, :k102::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m57::uuid, :k103, :k7, :h_p57, :k8, :k5, :k104::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m58::uuid, :k52, :k7, :h_p58, :k8, :k5, :k105::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m59::uuid, :k19, :k7, :h_p59, :k8, :k5, :k106::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m60::uuid, :k101, :k7, :h_p60, :k8, :k5, :k107::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m61::uuid, :k4, :k7, :h_p61, :k8, :k5, :k108::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m62::uuid, :k59, :k7, :h_p62, :k8, :k5, :k109::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m63::uuid, :k40, :k7, :h_p63, :k8, :k5, :k110::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m64::uuid, :k42, :k7, :h_p64, :k8, :k5, :k111::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m65::uuid, :k103, :k7, :h_p65, :k8, :k5, :k112::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m66::uuid, :k113, :k7, :h_p66, :k8, :k5, :k114::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m67::uuid, :k42, :k7, :h_p67, :k8, :k5, :k115::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m68::uuid, :k116, :k7, :h_p68, :k8, :k5, :k117::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m69::uuid, :k118, :k7, :h_p69, :k8, :k5, :k119::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m70::uuid, :k120, :k7, :h_p70, :k8, :k5, :k121::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m71::uuid, :k52, :k7, :h_p71, :k8, :k5, :k122::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m72::uuid, :k123, :k7, :h_p72, :k8, :k5, :k124::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m73::uuid, :k116, :k7, :h_p73, :k8, :k5, :k125::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m74::uuid, :k126, :k7, :h_p74, :k8, :k5, :k127::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m75::uuid, :k70, :k7, :h_p75, :k8, :k5, :k128::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m76::uuid, :k129, :k7, :h_p76, :k8, :k5, :k130::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m77::uuid, :k70, :k7, :h_p77, :k8, :k5, :k131::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m78::uuid, :k38, :k7, :h_p78, :k8, :k5, :k132::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m79::uuid, :k92, :k7, :h_p79, :k8, :k5, :k133::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m80::uuid, :k123, :k7, :h_p80, :k8, :k5, :k134::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m81::uuid, :k135, :k7, :h_p81, :k8, :k5, :k136::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m82::uuid, :k42, :k7, :h_p82, :k8, :k5, :k137::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m83::uuid, :k138, :k7, :h_p83, :k8, :k5, :k139::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m84::uuid, :k61, :k7, :h_p84, :k8, :k5, :k140::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m85::uuid, :k5, :k7, :h_p85, :k8, :k5, :k141::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m86::uuid, :k17, :k7, :h_p86, :k8, :k5, :k142::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m87::uuid, :k138, :k7, :h_p87, :k8, :k5, :k143::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m88::uuid, :k123, :k7, :h_p88, :k8, :k5, :k144::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m89::uuid, :k145, :k7, :h_p89, :k8, :k5, :k146::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m90::uuid, :k147, :k7, :h_p90, :k8, :k5, :k148::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m91::uuid, :k68, :k7, :h_p91, :k8, :k5, :k149::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m92::uuid, :k15, :k7, :h_p92, :k8, :k5, :k150::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m93::uuid, :k151, :k7, :h_p93, :k8, :k5, :k152::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m94::uuid, :k101, :k7, :h_p94, :k8, :k5, :k153::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m95::uuid, :k154, :k7, :h_p95, :k8, :k5, :k155::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m96::uuid, :k13, :k7, :h_p96, :k8, :k5, :k156::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m97::uuid, :k50, :k7, :h_p97, :k8, :k5, :k157::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m98::uuid, :k40, :k7, :h_p98, :k8, :k5, :k158::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m99::uuid, :k6, :k7, :h_p99, :k8, :k5, :k159::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m100::uuid, :k90, :k7, :h_p100, :k8, :k5, :k160::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m101::uuid, :k64, :k7, :h_p101, :k8, :k5, :k161::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m102::uuid, :k162, :k7, :h_p102, :k8, :k5, :k163::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m103::uuid, :k36, :k7, :h_p103, :k8, :k5, :k164::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m104::uuid, :k101, :k7, :h_p104, :k8, :k5, :k165::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m105::uuid, :k56, :k7, :h_p105, :k8, :k5, :k166::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m106::uuid, :k145, :k7, :h_p106, :k8, :k5, :k167::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m107::uuid, :k6, :k7, :h_p107, :k8, :k5, :k168::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m108::uuid, :k70, :k7, :h_p108, :k8, :k5, :k169::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m109::uuid, :k28, :k7, :h_p109, :k8, :k5, :k170::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m110::uuid, :k38, :k7, :h_p110, :k8, :k5, :k171::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m111::uuid, :k36, :k7, :h_p111, :k8, :k5, :k172::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m112::uuid, :k76, :k7, :h_p112, :k8, :k5, :k173::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m113::uuid, :k5, :k7, :h_p113, :k8, :k5, :k174::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m114::uuid, :k135, :k7, :h_p114, :k8, :k5, :k175::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m115::uuid, :k70, :k7, :h_p115, :k8, :k5, :k176::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m116::uuid, :k103, :k7, :h_p116, :k8, :k5, :k177::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m117::uuid, :k85, :k7, :h_p117, :k8, :k5, :k178::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m118::uuid, :k179, :k7, :h_p118, :k8, :k5, :k180::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m119::uuid, :k70, :k7, :h_p119, :k8, :k5, :k181::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m120::uuid, :k56, :k7, :h_p120, :k8, :k5, :k182::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m121::uuid, :k183, :k7, :h_p121, :k8, :k5, :k184::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m122::uuid, :k5, :k7, :h_p122, :k8, :k5, :k185::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m123::uuid, :k13, :k7, :h_p123, :k8, :k5, :k186::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m124::uuid, :k90, :k7, :h_p124, :k8, :k5, :k187::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m125::uuid, :k101, :k7, :h_p125, :k8, :k5, :k188::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m126::uuid, :k138, :k7, :h_p126, :k8, :k5, :k189::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m127::uuid, :k68, :k7, :h_p127, :k8, :k5, :k190::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m128::uuid, :k13, :k7, :h_p128, :k8, :k5, :k191::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m129::uuid, :k101, :k7, :h_p129, :k8, :k5, :k192::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m130::uuid, :k76, :k7, :h_p130, :k8, :k5, :k193::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m131::uuid, :k6, :k7, :h_p131, :k8, :k5, :k194::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m132::uuid, :k129, :k7, :h_p132, :k8, :k5, :k195::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m133::uuid, :k196, :k7, :h_p133, :k8, :k5, :k197::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m134::uuid, :k183, :k7, :h_p134, :k8, :k5, :k198::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m135::uuid, :k6, :k7, :h_p135, :k8, :k5, :k199::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m136::uuid, :k90, :k7, :h_p136, :k8, :k5, :k200::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m137::uuid, :k6, :k7, :h_p137, :k8, :k5, :k201::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m138::uuid, :k70, :k7, :h_p138, :k8, :k5, :k202::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m139::uuid, :k30, :k7, :h_p139, :k8, :k5, :k203::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m140::uuid, :k78, :k7, :h_p140, :k8, :k5, :k204::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m141::uuid, :k145, :k7, :h_p141, :k8, :k5, :k205::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m142::uuid, :k61, :k7, :h_p142, :k8, :k5, :k206::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m143::uuid, :k40, :k7, :h_p143, :k8, :k5, :k207::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m144::uuid, :k19, :k7, :h_p144, :k8, :k5, :k208::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m145::uuid, :k183, :k7, :h_p145, :k8, :k5, :k209::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m146::uuid, :k76, :k7, :h_p146, :k8, :k5, :k210::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m147::uuid, :k17, :k7, :h_p147, :k8, :k5, :k211::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m148::uuid, :k33, :k7, :h_p148, :k8, :k5, :k212::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m149::uuid, :k59, :k7, :h_p149, :k8, :k5, :k213::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m150::uuid, :k4, :k7, :h_p150, :k8, :k5, :k214::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m151::uuid, :k179, :k7, :h_p151, :k8, :k5, :k215::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m152::uuid, :k216, :k7, :h_p152, :k8, :k5, :k217::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m153::uuid, :k30, :k7, :h_p153, :k8, :k5, :k218::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m154::uuid, :k162, :k7, :h_p154, :k8, :k5, :k219::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m155::uuid, :k135, :k7, :h_p155, :k8, :k5, :k220::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m156::uuid, :k154, :k7, :h_p156, :k8, :k5, :k221::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m157::uuid, :k68, :k7, :h_p157, :k8, :k5, :k222::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m158::uuid, :k223, :k7, :h_p158, :k8, :k5, :k224::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m159::uuid, :k64, :k7, :h_p159, :k8, :k5, :k225::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m160::uuid, :k38, :k7, :h_p160, :k8, :k5, :k226::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m161::uuid, :k103, :k7, :h_p161, :k8, :k5, :k227::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m162::uuid, :k36, :k7, :h_p162, :k8, :k5, :k228::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m163::uuid, :k64, :k7, :h_p163, :k8, :k5, :k229::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m164::uuid, :k30, :k7, :h_p164, :k8, :k5, :k230::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m165::uuid, :k126, :k7, :h_p165, :k8, :k5, :k231::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m166::uuid, :k74, :k7, :h_p166, :k8, :k5, :k232::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m167::uuid, :k42, :k7, :h_p167, :k8, :k5, :k233::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m168::uuid, :k120, :k7, :h_p168, :k8, :k5, :k234::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m169::uuid, :k61, :k7, :h_p169, :k8, :k5, :k235::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m170::uuid, :k24, :k7, :h_p170, :k8, :k5, :k236::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m171::uuid, :k82, :k7, :h_p171, :k8, :k5, :k237::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m172::uuid, :k126, :k7, :h_p172, :k8, :k5, :k238::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m173::uuid, :k21, :k7, :h_p173, :k8, :k5, :k239::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m174::uuid, :k50, :k7, :h_p174, :k8, :k5, :k240::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m175::uuid, :k196, :k7, :h_p175, :k8, :k5, :k241::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m176::uuid, :k98, :k7, :h_p176, :k8, :k5, :k242::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m177::uuid, :k216, :k7, :h_p177, :k8, :k5, :k243::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m178::uuid, :k5, :k7, :h_p178, :k8, :k5, :k244::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m179::uuid, :k216, :k7, :h_p179, :k8, :k5, :k245::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m180::uuid, :k38, :k7, :h_p180, :k8, :k5, :k246::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m181::uuid, :k154, :k7, :h_p181, :k8, :k5, :k247::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m182::uuid, :k54, :k7, :h_p182, :k8, :k5, :k248::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m183::uuid, :k145, :k7, :h_p183, :k8, :k5, :k249::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m184::uuid, :k21, :k7, :h_p184, :k8, :k5, :k250::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m185::uuid, :k6, :k7, :h_p185, :k8, :k5, :k251::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m186::uuid, :k17, :k7, :h_p186, :k8, :k5, :k252::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m187::uuid, :k126, :k7, :h_p187, :k8, :k5, :k253::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m188::uuid, :k24, :k7, :h_p188, :k8, :k5, :k254::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m189::uuid, :k59, :k7, :h_p189, :k8, :k5, :k255::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m190::uuid, :k179, :k7, :h_p190, :k8, :k5, :k256::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m191::uuid, :k42, :k7, :h_p191, :k8, :k5, :k257::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m192::uuid, :k6, :k7, :h_p192, :k8, :k5, :k258::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m193::uuid, :k85, :k7, :h_p193, :k8, :k5, :k259::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m194::uuid, :k40, :k7, :h_p194, :k8, :k5, :k260::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m195::uuid, :k42, :k7, :h_p195, :k8, :k5, :k261::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m196::uuid, :k113, :k7, :h_p196, :k8, :k5, :k262::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m197::uuid, :k61, :k7, :h_p197, :k8, :k5, :k263::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m198::uuid, :k90, :k7, :h_p198, :k8, :k5, :k264::jsonb, :k10::jsonb, :as_of::timestamptz);
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (:h_m199::uuid, :k33, :k7, :h_p199, :k8, :k5, :k265::jsonb, :k10::jsonb, :as_of::timestamptz);
\endpipeline
COMMIT;
SELECT;
BEGIN;
SELECT clock_timestamp() AS now;
SELECT count(*) AS n FROM (
SELECT 1 FROM promotion.purchase AS p
 WHERE p.status = 'Active' AND p.ends_at <= :k266::timestamptz AND NOT EXISTS (SELECT 1 FROM jobs.item_failure AS f WHERE f.job = :k1 AND f.item_id = p.id AND f.next_attempt_at > :k266::timestamptz)
 LIMIT 10001) AS due;
DELETE FROM jobs.item_failure AS f WHERE f.job = :k1 AND NOT (EXISTS (SELECT 1 FROM promotion.purchase AS p WHERE p.id = f.item_id AND p.status = 'Active'));
INSERT INTO jobs.cycle AS c (job, instance, run_id, as_of, duration_ms, counters, succeeded)
        VALUES (:k1, :client_id, :h_m200::uuid, :as_of::timestamptz, :k267, :k268::jsonb, :k269::boolean)
        ON CONFLICT (job, instance) DO UPDATE
           SET run_id = excluded.run_id, as_of = excluded.as_of, finished_at = clock_timestamp(),
               duration_ms = excluded.duration_ms, counters = excluded.counters, succeeded = excluded.succeeded;
COMMIT;
