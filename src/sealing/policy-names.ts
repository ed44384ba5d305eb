/** The secrets policies' names, apart from their code so config validation loads no cryptography. */
export const SECRET_POLICIES = ['plaintext', 'sealed', 'reseal', 'drop'] as const;
export type SecretPolicy = (typeof SECRET_POLICIES)[number];
